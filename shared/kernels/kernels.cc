// Dispatcher, threading and elementwise kernels. The dot-product kernels
// themselves live in kernels_{scalar,avx2,avx512}.cc behind KernelTable.
#include "shared/kernels/kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "shared/kernels/kernels_internal.h"

namespace flotilla::kernels {
namespace {

#if FLOTILLA_KERNELS_X86
bool CpuHasAvx512() {
  __builtin_cpu_init();
  // The AVX-512 path uses BW (16-bit loads/masks), DQ and VL as well as F.
  return __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
}

bool CpuHasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

#endif

// On x86-64 the hand-written kernels are faster than Highway's
// (bench/measurements.md), so they come first; elsewhere Highway is the
// SIMD path (its own dispatcher falls back to portable code, never
// failing).
SimdLevel BestLevel() {
#if FLOTILLA_KERNELS_X86
  static const SimdLevel best = CpuHasAvx512() ? SimdLevel::kAvx512
                                : CpuHasAvx2() ? SimdLevel::kAvx2
                                               : SimdLevel::kHighway;
  return best;
#else
  return SimdLevel::kHighway;
#endif
}

bool Supported(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar:
    case SimdLevel::kHighway:
      return true;
#if FLOTILLA_KERNELS_X86
    case SimdLevel::kAvx2:
      return CpuHasAvx2();
    case SimdLevel::kAvx512:
      return CpuHasAvx512();
#else
    case SimdLevel::kAvx2:
    case SimdLevel::kAvx512:
      return false;
#endif
    case SimdLevel::kAuto:
      return false;
  }
  return false;
}

// The level in use, resolved (never kAuto). Relaxed ordering is enough: the
// level only changes between kernel calls (tests, benchmarks), and every
// level gives the same results anyway.
std::atomic<SimdLevel>& CurrentLevel() {
  static std::atomic<SimdLevel> level{BestLevel()};
  return level;
}

const internal::KernelTable& Table() {
  switch (CurrentLevel().load(std::memory_order_relaxed)) {
#if FLOTILLA_KERNELS_X86
    case SimdLevel::kAvx512:
      return internal::Avx512Table();
    case SimdLevel::kAvx2:
      return internal::Avx2Table();
#endif
    case SimdLevel::kHighway:
      return internal::HighwayTable();
    default:
      return internal::ScalarTable();
  }
}

// Rows are handed to threads in blocks of kRowBlock, the largest row block
// a SIMD kernel processes at once, so no chunk boundary splits a block into
// slower single rows. (Results do not depend on the split either way.)
constexpr size_t kRowBlock = 8;

// Runs fn(row_begin, row_end) over all rows on the pool, in chunks of at
// least ~64K multiply-adds so that the pool's hand-off (microseconds) stays
// small next to the work.
void ParallelRows(ThreadPool* pool, size_t rows, size_t cols, size_t n_tokens,
                  const std::function<void(size_t, size_t)>& fn) {
  const size_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  const size_t work_per_block =
      std::max<size_t>(1, kRowBlock * cols * n_tokens);
  const size_t min_blocks =
      std::max<size_t>(1, (size_t{1} << 16) / work_per_block);
  ParallelFor(pool, blocks, min_blocks, [&](size_t begin, size_t end) {
    fn(begin * kRowBlock, std::min(rows, end * kRowBlock));
  });
}

// Scratch for x widened to double, shared by the pool's threads for one
// call. It belongs to the calling thread and only grows, so steady-state
// decoding touches no fresh pages (a page's first touch costs a fault).
// 64-byte aligned: a vector load that straddles two cache lines costs two
// (BM_Bf16WidenFmaCeiling: 37 -> 55 GB/s of work at 8 tokens).
double* ThreadBuffer(size_t n) {
  thread_local std::vector<double> buffer;
  if (buffer.size() < n + 8) buffer.resize(n + 8);
  const uintptr_t p = reinterpret_cast<uintptr_t>(buffer.data());
  return reinterpret_cast<double*>((p + 63) & ~uintptr_t{63});
}

}  // namespace

SimdLevel SetSimdLevel(SimdLevel level) {
  const SimdLevel resolved = Supported(level) ? level : BestLevel();
  CurrentLevel().store(resolved, std::memory_order_relaxed);
  return resolved;
}

SimdLevel ActiveSimdLevel() {
  return CurrentLevel().load(std::memory_order_relaxed);
}

const char* SimdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAuto:
      return "auto";
    case SimdLevel::kScalar:
      return "scalar";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kAvx512:
      return "avx512";
    case SimdLevel::kHighway:
      return "highway";
  }
  return "unknown";
}

bool SimdLevelFromName(const char* name, SimdLevel* level) {
  for (SimdLevel l : {SimdLevel::kAuto, SimdLevel::kScalar, SimdLevel::kAvx2,
                      SimdLevel::kAvx512, SimdLevel::kHighway}) {
    if (std::string(name) == SimdLevelName(l)) {
      *level = l;
      return true;
    }
  }
  return false;
}

std::string UseSimdLevelNamed(const char* name) {
  std::string have = "auto";
  for (SimdLevel l : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512,
                      SimdLevel::kHighway}) {
    if (Supported(l)) have += std::string(", ") + SimdLevelName(l);
  }
  SimdLevel level;
  if (!SimdLevelFromName(name, &level)) {
    return std::string("unknown SIMD level \"") + name + "\" (this CPU has " +
           have + ")";
  }
  if (level != SimdLevel::kAuto && !Supported(level)) {
    return std::string("this CPU has no ") + name + " (it has " + have + ")";
  }
  SetSimdLevel(level);
  return "";
}

// Tokens per pass over the weights. Within a pass every row block meets
// all of the pass's tokens while its weights sit in L1/L2, so weights leave
// memory once per pass; bounding the pass keeps the widened x (cols * 8
// bytes per token) cache-resident and the scratch small for long prompts.
// Results do not depend on it: each output is one independent dot product.
constexpr size_t kTokensPerPass = 32;

void MatMul(const DenseMatrix& w, const float* x, size_t n_tokens, float* y,
            ThreadPool* pool) {
  if (w.rows == 0) return;
  const internal::KernelTable& k = Table();
  const bool prep = w.type == DenseType::kBF16 && k.bf16_prep != nullptr;
  const size_t stride = internal::Bf16XStride(w.cols);
  for (size_t t0 = 0; t0 < n_tokens; t0 += kTokensPerPass) {
    const size_t nt = std::min(kTokensPerPass, n_tokens - t0);
    const float* xt = x + t0 * w.cols;
    float* yt = y + t0 * w.rows;
    const double* xd = nullptr;
    if (prep) {
      double* buffer = ThreadBuffer(nt * stride);
      for (size_t t = 0; t < nt; ++t) {
        k.bf16_prep(xt + t * w.cols, w.cols, buffer + t * stride);
      }
      xd = buffer;
    }
    ParallelRows(pool, w.rows, w.cols, nt, [&](size_t begin, size_t end) {
      k.dense_rows(w, xt, xd, nt, begin, end, yt);
    });
  }
}

void MatMulMxfp4(const Mxfp4Matrix& w, const float* x, size_t n_tokens,
                 float* y, ThreadPool* pool) {
  if (w.rows == 0) return;
  const internal::KernelTable& k = Table();
  const bool prep = k.mxfp4_prep != nullptr;
  for (size_t t0 = 0; t0 < n_tokens; t0 += kTokensPerPass) {
    const size_t nt = std::min(kTokensPerPass, n_tokens - t0);
    const float* xt = x + t0 * w.cols;
    float* yt = y + t0 * w.rows;
    // The SIMD levels read x widened and permuted once per pass, not per
    // row.
    const double* xd = nullptr;
    if (prep) {
      double* buffer = ThreadBuffer(nt * w.cols);
      for (size_t t = 0; t < nt; ++t) {
        k.mxfp4_prep(xt + t * w.cols, w.cols, buffer + t * w.cols);
      }
      xd = buffer;
    }
    // An MXFP4 multiply-add costs about as much as a dense one.
    ParallelRows(pool, w.rows, w.cols, nt, [&](size_t begin, size_t end) {
      k.mxfp4_rows(w, xt, xd, nt, begin, end, yt);
    });
  }
}

void DequantizeMxfp4Row(const Mxfp4Matrix& w, size_t row, float* out) {
  const uint8_t* packed = w.packed + row * (w.cols / 2);
  const uint8_t* scales = w.scales + row * (w.cols / 32);
  for (size_t c = 0; c < w.cols; ++c) {
    const unsigned s = scales[c / 32];
    const uint8_t byte = packed[c / 2];
    const int nibble = (c % 2 == 0) ? (byte & 15) : (byte >> 4);
    // Computed in double and rounded once; exact, because an E2M1 value has
    // two significant bits and 2^(s-127) >= 2^-127 (subnormal floats are
    // kept, never flushed).
    const double scale =
        s == 255 ? 0.0 : std::ldexp(1.0, static_cast<int>(s) - 127);
    out[c] = static_cast<float>(internal::kE2m1Lut[nibble] * scale);
  }
}

double DotF32(const float* a, const float* b, size_t n) {
  return Table().dot_f32(a, b, n);
}

void DotF32Rows(const float* a, const float* rows, size_t stride, size_t count,
                size_t n, float* out) {
  Table().dot_f32_rows(a, rows, stride, count, n, out);
}

void AddWeightedRows(const float* w, const float* rows, size_t stride,
                     size_t count, size_t n, float* acc) {
  Table().add_weighted_rows(w, rows, stride, count, n, acc);
}

void DotF32RowsMany(const float* a, size_t a_stride, size_t a_count,
                    const float* rows, size_t row_stride, size_t row_count,
                    size_t n, float* out, size_t out_stride) {
#if FLOTILLA_KERNELS_X86
  if (ActiveSimdLevel() == SimdLevel::kAvx512) {
    internal::DotF32RowsManyAvx512(a, a_stride, a_count, rows, row_stride,
                                   row_count, n, out, out_stride);
    return;
  }
#endif
  const internal::KernelTable& k = Table();
  for (size_t i = 0; i < a_count; ++i) {
    k.dot_f32_rows(a + i * a_stride, rows, row_stride, row_count, n,
                   out + i * out_stride);
  }
}

void AddWeightedRowsMany(const float* w, size_t w_stride, size_t w_count,
                         const float* rows, size_t row_stride, size_t row_count,
                         size_t n, float* acc, size_t acc_stride) {
#if FLOTILLA_KERNELS_X86
  if (ActiveSimdLevel() == SimdLevel::kAvx512) {
    internal::AddWeightedRowsManyAvx512(w, w_stride, w_count, rows, row_stride,
                                        row_count, n, acc, acc_stride);
    return;
  }
#endif
  const internal::KernelTable& k = Table();
  for (size_t i = 0; i < w_count; ++i) {
    k.add_weighted_rows(w + i * w_stride, rows, row_stride, row_count, n,
                        acc + i * acc_stride);
  }
}

void RmsNorm(const float* x, const float* w, size_t n, float eps, float* y) {
  if (n == 0) return;
  const double sum_sq = DotF32(x, x, n);
  const float inv = static_cast<float>(
      1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps));
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i] * inv;
    y[i] = w != nullptr ? w[i] * v : v;
  }
}

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

void SituGlu(const float* g, const float* u, size_t n, float beta1, float beta2,
             float* y) {
  // An infinite beta is the limit b tanh(x / b) -> x: no clamp (SwiGLU).
  const bool clamp_gate = !std::isinf(beta1), clamp_up = !std::isinf(beta2);
  for (size_t i = 0; i < n; ++i) {
    // The sigmoid takes the uncapped gate (docs/k3-architecture.md section 3).
    const float capped = clamp_gate ? beta1 * std::tanh(g[i] / beta1) : g[i];
    const float gate = capped * Sigmoid(g[i]);
    const float up = clamp_up ? beta2 * std::tanh(u[i] / beta2) : u[i];
    y[i] = gate * up;
  }
}

void ClampedSwiglu(const float* g, const float* u, size_t n, float limit,
                   float alpha, float* y) {
  for (size_t i = 0; i < n; ++i) {
    const float gate = std::min(g[i], limit);
    const float up = std::clamp(u[i], -limit, limit);
    y[i] = (up + 1.0f) * (gate * Sigmoid(alpha * gate));
  }
}

void Softmax(float* x, size_t n) {
  if (n == 0) return;
  float max_v = x[0];
  for (size_t i = 1; i < n; ++i) max_v = std::max(max_v, x[i]);
  // The exponentials first, then their sum: the same additions in the same
  // order, but the running sum no longer waits in memory across each call.
  for (size_t i = 0; i < n; ++i) x[i] = std::exp(x[i] - max_v);
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += x[i];
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(static_cast<double>(x[i]) / sum);
  }
}

void SiluInPlace(float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = x[i] * Sigmoid(x[i]);
}

}  // namespace flotilla::kernels
