// flotilla-bench-kernels: matrix-vector throughput at real K3 shapes, and
// the machine's streaming read bandwidth to compare it with.
//
// Weights are streamed from memory, as in decoding: each iteration uses the
// next of several weight copies whose total exceeds the last-level cache, so
// the figures are not L3 hits. All buffers are written (pre-faulted) during
// setup, outside the timed loop: a first touch costs a page fault.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "shared/kernels/fp8.h"
#include "shared/kernels/kernels.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::kernels {
namespace {

// Weight copies per benchmark add up to at least this many bytes.
constexpr size_t kStreamBytes = size_t{384} << 20;

uint64_t NextRandom(uint64_t* state) {
  // xorshift64*: fast enough to fill hundreds of MB during setup.
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  return *state * 0x2545F4914F6CDD1DULL;
}

void FillRandomBytes(uint8_t* p, size_t n, uint64_t seed) {
  uint64_t state = seed | 1;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t r = NextRandom(&state);
    std::memcpy(p + i, &r, 8);
  }
  for (; i < n; ++i) p[i] = static_cast<uint8_t>(NextRandom(&state));
}

std::vector<float> RandomActivations(size_t n, uint64_t seed) {
  std::vector<float> x(n);
  uint64_t state = seed | 1;
  for (float& v : x) {
    v = static_cast<float>(static_cast<int64_t>(NextRandom(&state) >> 40) -
                           (int64_t{1} << 23)) /
        static_cast<float>(1 << 23);
  }
  return x;
}

size_t CopiesFor(size_t bytes_per_copy) {
  return bytes_per_copy >= kStreamBytes
             ? 2
             : (kStreamBytes + bytes_per_copy - 1) / bytes_per_copy;
}

enum class Fill { kPackedNibbles, kScales, kBf16, kFp8 };

// Weight bytes, generated (and so pre-faulted) once per size and kind and
// shared by every benchmark instance, so page faults stay out of the timing.
const std::vector<uint8_t>& CachedWeights(size_t bytes, Fill fill) {
  static std::map<std::pair<size_t, Fill>, std::vector<uint8_t>> cache;
  std::vector<uint8_t>& v = cache[{bytes, fill}];
  if (v.size() == bytes) return v;
  v.resize(bytes);
  FillRandomBytes(v.data(), bytes, 1 + static_cast<uint64_t>(fill));
  if (fill == Fill::kScales) {
    // Realistic exponents (the real expert bytes use 120..122).
    for (uint8_t& b : v) b = 118 + b % 7;
  } else if (fill == Fill::kFp8) {
    // As quantised weights are: random sign and mantissa, normal exponents
    // 1..14 (no NaN), and one code in 8192 subnormal (DeepSeek-V3's
    // fixture: 377 of its FP8 codes; gaussian weights with the block's
    // amax at 448 give about 1e-4).
    for (size_t i = 0; i < bytes; ++i) {
      const uint8_t b = v[i];
      const int exponent = i % 8192 == 4095 ? 0 : 1 + (b >> 3) % 14;
      v[i] = static_cast<uint8_t>((b & 0x87) | (exponent << 3));
    }
  } else if (fill == Fill::kBf16) {
    // Random sign and mantissa, exponent 120..127: finite, normal bf16.
    for (size_t i = 0; i + 1 < bytes; i += 2) {
      uint16_t w;
      std::memcpy(&w, &v[i], 2);
      w = static_cast<uint16_t>((w & 0x807f) | ((120 + (w >> 7) % 8) << 7));
      std::memcpy(&v[i], &w, 2);
    }
  }
  return v;
}

SimdLevel LevelArg(int64_t arg) {
  return arg == 0   ? SimdLevel::kScalar
         : arg == 1 ? SimdLevel::kAvx2
         : arg == 2 ? SimdLevel::kAvx512
                    : SimdLevel::kHighway;
}

// Args: rows, cols, threads, simd level (0 scalar, 1 avx2, 2 avx512,
// 3 highway),
// tokens.
void BM_Mxfp4MatVec(benchmark::State& state) {
  const size_t rows = state.range(0), cols = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const SimdLevel level = LevelArg(state.range(3));
  const size_t n_tokens = state.range(4);
  if (SetSimdLevel(level) != level) {
    state.SkipWithError("SIMD level not supported by this CPU");
    return;
  }
  const size_t packed_bytes = rows * cols / 2, scale_bytes = rows * cols / 32;
  const size_t copies = CopiesFor(packed_bytes + scale_bytes);
  const std::vector<uint8_t>& packed =
      CachedWeights(copies * packed_bytes, Fill::kPackedNibbles);
  const std::vector<uint8_t>& scales =
      CachedWeights(copies * scale_bytes, Fill::kScales);
  const std::vector<float> x = RandomActivations(n_tokens * cols, 2);
  std::vector<float> y(n_tokens * rows);
  ThreadPool pool(threads);
  size_t copy = 0;
  for (auto _ : state) {
    const Mxfp4Matrix w{packed.data() + copy * packed_bytes,
                        scales.data() + copy * scale_bytes, rows, cols};
    MatMulMxfp4(w, x.data(), n_tokens, y.data(), &pool);
    benchmark::DoNotOptimize(y.data());
    copy = (copy + 1) % copies;
  }
  state.counters["weight_B/s"] =
      benchmark::Counter(static_cast<double>(packed_bytes + scale_bytes),
                         benchmark::Counter::kIsIterationInvariantRate);
  // The work rate: weight bytes times the rows (tokens) they multiply.
  state.counters["work_B/s"] = benchmark::Counter(
      static_cast<double>((packed_bytes + scale_bytes) * n_tokens),
      benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(SimdLevelName(level));
  SetSimdLevel(SimdLevel::kAuto);
}

// Args as BM_Mxfp4MatVec.
void BM_Bf16MatVec(benchmark::State& state) {
  const size_t rows = state.range(0), cols = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const SimdLevel level = LevelArg(state.range(3));
  const size_t n_tokens = state.range(4);
  if (SetSimdLevel(level) != level) {
    state.SkipWithError("SIMD level not supported by this CPU");
    return;
  }
  const size_t bytes = rows * cols * sizeof(uint16_t);
  const size_t copies = CopiesFor(bytes);
  const uint16_t* weights = reinterpret_cast<const uint16_t*>(
      CachedWeights(copies * bytes, Fill::kBf16).data());
  const std::vector<float> x = RandomActivations(n_tokens * cols, 4);
  std::vector<float> y(n_tokens * rows);
  ThreadPool pool(threads);
  size_t copy = 0;
  for (auto _ : state) {
    const DenseMatrix w{DenseType::kBF16, weights + copy * rows * cols, rows,
                        cols};
    MatMul(w, x.data(), n_tokens, y.data(), &pool);
    benchmark::DoNotOptimize(y.data());
    copy = (copy + 1) % copies;
  }
  state.counters["weight_B/s"] =
      benchmark::Counter(static_cast<double>(bytes),
                         benchmark::Counter::kIsIterationInvariantRate);
  state.counters["work_B/s"] =
      benchmark::Counter(static_cast<double>(bytes * n_tokens),
                         benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(SimdLevelName(level));
  SetSimdLevel(SimdLevel::kAuto);
}

// FP8 e4m3 with 128x128 block scales (DeepSeek-V3 / Kimi K2), computed on
// the bytes. Args as BM_Mxfp4MatVec.
void BM_Fp8MatVec(benchmark::State& state) {
  const size_t rows = state.range(0), cols = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const SimdLevel level = LevelArg(state.range(3));
  const size_t n_tokens = state.range(4);
  if (SetSimdLevel(level) != level) {
    state.SkipWithError("SIMD level not supported by this CPU");
    return;
  }
  const size_t bytes = rows * cols;
  const size_t copies = CopiesFor(bytes);
  const uint8_t* codes = CachedWeights(copies * bytes, Fill::kFp8).data();
  Fp8BlockMatrix shape{nullptr, nullptr, rows, cols};
  const std::vector<float> scales(shape.scale_rows() * shape.scale_cols(),
                                  1e-3f);
  const std::vector<float> x = RandomActivations(n_tokens * cols, 5);
  std::vector<float> y(n_tokens * rows);
  ThreadPool pool(threads);
  size_t copy = 0;
  for (auto _ : state) {
    const Fp8BlockMatrix w{codes + copy * bytes, scales.data(), rows, cols};
    MatMulFp8(w, x.data(), n_tokens, y.data(), &pool);
    benchmark::DoNotOptimize(y.data());
    copy = (copy + 1) % copies;
  }
  state.counters["weight_B/s"] =
      benchmark::Counter(static_cast<double>(bytes),
                         benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(SimdLevelName(level));
  SetSimdLevel(SimdLevel::kAuto);
}

// The machine's double-precision FMA ceiling on one thread: twelve
// independent zmm FMA chains in registers, nothing loaded. The dense and
// MXFP4 kernels accumulate in double (kernels.h), so their work rate can
// approach this at most (bench/measurements.md: they reach a third).
// GCC 12 reports its own _mm512 placeholders as uninitialised (GCC bug
// 105593), as in the kernels' AVX-512 files.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"), noinline)) double DoubleFmaLoop(
    long iterations, double seed) {
  __m512d a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_pd(seed + i * 1e-9);
  const __m512d m = _mm512_set1_pd(0.999999999), c = _mm512_set1_pd(1e-9);
  for (long k = 0; k < iterations; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_pd(a[i], m, c);
  }
  alignas(64) double lanes[8];
  double sum = 0;
  for (int i = 0; i < 12; ++i) {
    _mm512_store_pd(lanes, a[i]);
    sum += lanes[0];
  }
  return sum;
}

// The AVX-512 bf16 kernel's arithmetic with nothing else in the way: 16
// bf16 weights from L1 widened to two double vectors (zero-extend, shift,
// two float -> double conversions), then T tokens' two FMAs each, x from L1
// (T x 256 doubles, 16 KB at 8 tokens, 64-byte aligned: a zmm load that
// straddles two cache lines costs two), accumulators in registers. What one
// core can do at best per weight and token with this widening: the ceiling
// of the batch work rate under the Dot16 order (issue 34).
template <int T>
__attribute__((target("avx512f,avx512bw,avx512dq"), noinline)) double
Bf16WidenFmaLoop(const uint16_t* w, const double* x, long reps) {
  constexpr int kCols = 256;
  __m512d acc[T][2];
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_pd();
  for (long r = 0; r < reps; ++r) {
    for (int c = 0; c < kCols; c += 16) {
      const __m256i bits =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + c));
      const __m512 f = _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
      const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(f));
      const __m512d hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(f, 1));
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        acc[t][0] =
            _mm512_fmadd_pd(lo, _mm512_loadu_pd(x + t * kCols + c), acc[t][0]);
        acc[t][1] = _mm512_fmadd_pd(hi, _mm512_loadu_pd(x + t * kCols + c + 8),
                                    acc[t][1]);
      }
    }
  }
  alignas(64) double lanes[8];
  double sum = 0;
  for (int t = 0; t < T; ++t) {
    _mm512_store_pd(lanes, _mm512_add_pd(acc[t][0], acc[t][1]));
    sum += lanes[0];
  }
  return sum;
}
#pragma GCC diagnostic pop

template <int T>
void BM_Bf16WidenFmaCeiling(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f") ||
      !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512dq")) {
    state.SkipWithError("no AVX-512");
    return;
  }
  constexpr long kReps = 1 << 14;
  alignas(64) static uint16_t w[256];
  alignas(64) static double x[T * 256];
  for (uint16_t& v : w) v = 0x3f80;  // 1.0
  for (double& v : x) v = 1e-9;
  for (auto _ : state) {
    benchmark::DoNotOptimize(Bf16WidenFmaLoop<T>(w, x, kReps));
  }
  // Weight bytes times tokens per second: kernels' work_B/s counter.
  state.counters["work_B/s"] = benchmark::Counter(
      2.0 * 256 * T * kReps, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_DoubleFmaCeiling(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) {
    state.SkipWithError("no AVX-512");
    return;
  }
  constexpr long kIterations = 1 << 20;
  double seed = 1.0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(seed);  // an input the compiler cannot fold
    benchmark::DoNotOptimize(DoubleFmaLoop(kIterations, seed));
  }
  // Double products per second (8 per FMA).
  state.counters["products/s"] = benchmark::Counter(
      12.0 * 8 * kIterations, benchmark::Counter::kIsIterationInvariantRate);
}

// Streaming read of a pre-faulted 1 GiB buffer, split across the threads:
// the ceiling that a memory-bound matvec can reach on this machine.
void BM_MemoryReadSum(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  constexpr size_t kBytes = size_t{1} << 30;
  const size_t words = kBytes / sizeof(uint64_t);
  // Allocated and pre-faulted once for all runs of this benchmark.
  static const std::unique_ptr<uint64_t[]> buffer = [&] {
    std::unique_ptr<uint64_t[]> b(new uint64_t[words]);
    for (size_t i = 0; i < words; ++i) b[i] = i;
    return b;
  }();
  ThreadPool pool(threads);
  std::vector<uint64_t> partial(threads * 8);  // One cache line per thread.
  for (auto _ : state) {
    const size_t per_thread = words / threads;
    ParallelFor(&pool, threads, 1, [&](size_t begin, size_t end) {
      for (size_t t = begin; t < end; ++t) {
        const uint64_t* p = buffer.get() + t * per_thread;
        // Four independent sums keep several loads in flight per cycle.
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t i = 0; i < per_thread; i += 4) {
          s0 += p[i];
          s1 += p[i + 1];
          s2 += p[i + 2];
          s3 += p[i + 3];
        }
        partial[t * 8] = s0 + s1 + s2 + s3;
      }
    });
    benchmark::DoNotOptimize(partial.data());
  }
  state.counters["read_B/s"] =
      benchmark::Counter(static_cast<double>(kBytes),
                         benchmark::Counter::kIsIterationInvariantRate);
}

// Expert matrices: w1/w3 are [3072, 3584] (latent 3584 -> intermediate
// 3072), w2 is [3584, 3072].
void Mxfp4Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "threads", "simd", "tokens"});
  for (auto [rows, cols] : {std::pair{3072, 3584}, std::pair{3584, 3072}}) {
    for (int level : {0, 1, 2, 3}) b->Args({rows, cols, 1, level, 1});
    b->Args({rows, cols, 2, 2, 1});
  }
  // The batch: 1, 2, 4, 8 and 16 rows (tokens) through one matrix.
  for (int tokens : {2, 4, 8, 16}) b->Args({3072, 3584, 2, 2, tokens});
  b->Args({3072, 3584, 1, 2, 8});
  // k3-bench's experts (768 x 1024 gate/up, 1024 x 768 down): small enough
  // that the pool's hand-off shows.
  for (int threads : {1, 2}) {
    b->Args({768, 1024, threads, 2, 1});
    b->Args({1024, 768, threads, 2, 1});
  }
}

// Attention projections: q/k/v/g are [12288, 7168], o_proj [7168, 12288].
void Bf16Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "cols", "threads", "simd", "tokens"});
  for (auto [rows, cols] : {std::pair{12288, 7168}, std::pair{7168, 12288}}) {
    for (int level : {0, 1, 2, 3}) b->Args({rows, cols, 1, level, 1});
    b->Args({rows, cols, 2, 2, 1});
  }
  for (int tokens : {2, 4, 8, 16}) b->Args({12288, 7168, 2, 2, tokens});
  b->Args({12288, 7168, 1, 2, 8});
  // k3-bench's trunk (hidden 2048): one-row decode runs many small matrices.
  for (auto [rows, cols] :
       {std::pair{2048, 2048}, std::pair{512, 2048}, std::pair{288, 2048},
        std::pair{1536, 512}, std::pair{2048, 1024}, std::pair{32768, 2048}}) {
    b->Args({rows, cols, 1, 2, 1});
    b->Args({rows, cols, 2, 2, 1});
  }
}

// Other jobs share these 2 vCPUs: with --benchmark_repetitions the best
// repetition (min time, max rate) is the closest to an idle machine.
void BestOf(benchmark::internal::Benchmark* b) {
  b->ComputeStatistics("min", [](const std::vector<double>& v) {
    return *std::min_element(v.begin(), v.end());
  });
  b->ComputeStatistics("max", [](const std::vector<double>& v) {
    return *std::max_element(v.begin(), v.end());
  });
}

BENCHMARK(BM_Mxfp4MatVec)
    ->Apply(Mxfp4Args)
    ->Apply(BestOf)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Bf16MatVec)
    ->Apply(Bf16Args)
    ->Apply(BestOf)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Fp8MatVec)
    ->ArgNames({"rows", "cols", "threads", "simd", "tokens"})
    ->Args({7168, 2048, 1, 0, 1})
    ->Args({7168, 2048, 1, 1, 1})
    ->Args({7168, 2048, 1, 2, 1})
    ->Args({7168, 2048, 2, 2, 1})
    ->Args({7168, 2048, 2, 2, 8})
    ->Apply(BestOf)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DoubleFmaCeiling)->Apply(BestOf)->UseRealTime();
BENCHMARK(BM_Bf16WidenFmaCeiling<1>)->Apply(BestOf)->UseRealTime();
BENCHMARK(BM_Bf16WidenFmaCeiling<2>)->Apply(BestOf)->UseRealTime();
BENCHMARK(BM_Bf16WidenFmaCeiling<4>)->Apply(BestOf)->UseRealTime();
BENCHMARK(BM_Bf16WidenFmaCeiling<8>)->Apply(BestOf)->UseRealTime();
BENCHMARK(BM_MemoryReadSum)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Apply(BestOf)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace flotilla::kernels

BENCHMARK_MAIN();
