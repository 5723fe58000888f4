#include "shared/plan/compute_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/base/elapsed.h"
#include "shared/io/checksum.h"
#include "shared/kernels/fp8.h"
#include "shared/kernels/kernels.h"
#include "shared/kernels/recurrent.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::plan {
namespace {

// Weights the matvec probes cycle through: several times any last-level
// cache, so every call reads its weights from RAM as decode does.
constexpr uint64_t kMatvecScratch = uint64_t{128} << 20;
constexpr uint64_t kMxfp4Scratch = uint64_t{96} << 20;
constexpr uint64_t kChecksumBytes = uint64_t{64} << 20;
constexpr int kMlaPositions = 1024;

// Calls fn(i) for i = 0, 1, ... until `seconds` have passed (at least 3
// calls, after one untimed call) and returns calls per second.
double CallsPerSecond(double seconds, const std::function<void(int)>& fn) {
  fn(0);
  const auto start = std::chrono::steady_clock::now();
  int calls = 0;
  double elapsed = 0;
  while (calls < 3 || elapsed < seconds) {
    fn(++calls);
    elapsed = base::SecondsSince(start);
  }
  return calls / elapsed;
}

// Bytes per element of a trunk matrix of `dtype` as stored.
size_t DTypeBytes(model::DType dtype) {
  return dtype == model::DType::kBF16     ? 2
         : dtype == model::DType::kF8E4M3 ? 1
                                          : 4;
}

// Seconds per byte of one-token matvecs of a [rows][cols] matrix of
// `dtype`, timed on a slice of at most 32 MB per matrix over copies that
// total 128 MB (so the weights come from RAM, as in decode).
double SecondsPerByte(model::DType dtype, size_t rows, size_t cols,
                      kernels::ThreadPool* pool, double seconds,
                      size_t tokens = 1) {
  const size_t el = DTypeBytes(dtype);
  rows = std::clamp<size_t>((32u << 20) / (el * cols), 1, rows);
  const size_t n = rows * cols;
  const int copies =
      static_cast<int>(std::max<uint64_t>(2, kMatvecScratch / (el * n)));
  if (dtype == model::DType::kF8E4M3) {
    // Codes below the NaN pair, one block scale per 128x128.
    std::vector<uint8_t> w(n * copies);
    for (size_t i = 0; i < w.size(); ++i) {
      w[i] = static_cast<uint8_t>((i * 2654435761u >> 24) % 0x70);
    }
    std::vector<float> scales(((rows + 127) / 128) * ((cols + 127) / 128),
                              1e-3f);
    std::vector<float> x(cols * tokens, 0.01f), y(rows * tokens);
    const double calls = CallsPerSecond(seconds, [&](int i) {
      kernels::Fp8BlockMatrix m{w.data() + (i % copies) * n, scales.data(),
                                rows, cols};
      kernels::MatMulFp8(m, x.data(), tokens, y.data(), pool);
    });
    return 1.0 / (calls * static_cast<double>(n));
  }
  std::vector<uint16_t> w(n * copies * (el / 2));
  for (size_t i = 0; i < w.size(); ++i) {
    // Small finite values in either reading (bf16, or f32 halves).
    w[i] = static_cast<uint16_t>(0x3c00 + (i * 2654435761u >> 26));
  }
  std::vector<float> x(cols * tokens, 0.01f), y(rows * tokens);
  const double calls = CallsPerSecond(seconds, [&](int i) {
    kernels::DenseMatrix m{dtype == model::DType::kBF16
                               ? kernels::DenseType::kBF16
                               : kernels::DenseType::kF32,
                           w.data() + (i % copies) * n * (el / 2), rows, cols};
    kernels::MatMul(m, x.data(), tokens, y.data(), pool);
  });
  return 1.0 / (calls * static_cast<double>(el * n));
}

// Every trunk matrix a decoded token multiplies (each layer's 2-D fields as
// the pack lays them out, and the lm_head: ModelShape::matmuls), timed
// shape by shape: the rate of small projections is half that of large ones
// (per-call hand-out to the pool), so one shape would misjudge a real layer.
// Also returns, in `overlap`, the share of that time spent before a MoE
// layer waits for its routed experts, which is what the experts' guessed
// reads hide behind.
using Shape = std::tuple<model::DType, size_t, size_t>;

double TrunkMatvecRate(const model::ModelShape& m, kernels::ThreadPool* pool,
                       double seconds, double* overlap, size_t tokens = 1) {
  std::map<Shape, uint64_t> uses, before_experts;
  for (const model::TrunkMatmul& mm : m.matmuls) {
    if (mm.rows <= 0 || mm.cols <= 0 || mm.uses <= 0) continue;
    const Shape shape{mm.dtype, static_cast<size_t>(mm.rows),
                      static_cast<size_t>(mm.cols)};
    uses[shape] += mm.uses;
    if (mm.uses_before_experts > 0) {
      before_experts[shape] += mm.uses_before_experts;
    }
  }
  if (uses.empty()) {
    *overlap = 0;
    return 0;
  }
  const double each = std::max(0.02, seconds / uses.size());
  double bytes = 0, time = 0, time_before = 0;
  for (const auto& [shape, count] : uses) {
    const auto& [dtype, rows, cols] = shape;
    const double per_use =
        static_cast<double>(rows) * cols * DTypeBytes(dtype) *
        SecondsPerByte(dtype, rows, cols, pool, each, tokens);
    bytes += static_cast<double>(count) * rows * cols * DTypeBytes(dtype);
    time += count * per_use;
    auto it = before_experts.find(shape);
    if (it != before_experts.end()) time_before += it->second * per_use;
  }
  *overlap = time > 0 ? time_before / time : 0;
  return time > 0 ? bytes / time : 0;
}

// Expert weight bytes per second, one expert as the executor applies it:
// w1 and w3 (I x H), then w2 (H x I), each one call on the pool.
double Mxfp4Rate(const model::ModelShape& m, kernels::ThreadPool* pool,
                 double seconds) {
  const size_t inter = std::max<size_t>(32, m.expert_intermediate / 32 * 32);
  const size_t lat = std::max<size_t>(32, m.expert_hidden / 32 * 32);
  const size_t packed = inter * lat / 2, scales = inter * lat / 32;
  const size_t run = 3 * (packed + scales);
  const int copies =
      static_cast<int>(std::max<uint64_t>(2, kMxfp4Scratch / run));
  std::vector<uint8_t> p(3 * packed * copies), s(3 * scales * copies);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i * 97);
  for (size_t i = 0; i < s.size(); ++i) {
    s[i] = static_cast<uint8_t>(118 + i % 7);
  }
  std::vector<float> x(std::max(inter, lat), 0.01f), y(std::max(inter, lat));
  const double calls = CallsPerSecond(seconds, [&](int i) {
    for (size_t w = 0; w < 3; ++w) {
      const size_t at = static_cast<size_t>(i % copies) * 3 + w;
      kernels::Mxfp4Matrix m{p.data() + at * packed, s.data() + at * scales,
                             w < 2 ? inter : lat, w < 2 ? lat : inter};
      kernels::MatMulMxfp4(m, x.data(), 1, y.data(), pool);
    }
  });
  return calls * static_cast<double>(run);
}

// Dense (bf16, f32 or FP8 block-scaled) experts run the trunk's matvec on their
// three matrices.
double ExpertRate(const model::ModelShape& m, kernels::ThreadPool* pool,
                  double seconds) {
  if (m.expert_hidden <= 0 || m.expert_intermediate <= 0) return 0;
  // mxfp4_bias (gpt-oss) is the same kernel; its biases are rows floats.
  if (m.expert_format == "mxfp4" || m.expert_format == "mxfp4_bias") {
    return Mxfp4Rate(m, pool, seconds);
  }
  const model::DType dtype = m.expert_format == "bf16" ? model::DType::kBF16
                             : m.expert_format == "fp8_e4m3"
                                 ? model::DType::kF8E4M3
                                 : model::DType::kF32;
  const size_t h = m.expert_hidden, i = m.expert_intermediate;
  const double up = SecondsPerByte(dtype, i, h, pool, seconds / 2);
  const double down = SecondsPerByte(dtype, h, i, pool, seconds / 2);
  // w1 and w3 at the up rate, w2 at the down rate: bytes over time.
  return 3.0 / (2 * up + down);
}

double KdaRate(const model::ModelShape& m, double seconds) {
  if (m.recurrent_layers <= 0) return 0;
  const int heads = std::max(1, m.recurrent_heads);
  const int d = std::max(1, m.recurrent_head_dim);
  const size_t p = static_cast<size_t>(heads) * d;
  std::vector<float> state(p * d, 0.0f), q(p, 0.02f), k(p, 0.03f), v(p, 0.5f),
      alpha(p, 0.97f), beta(heads, 0.5f), out(p);
  const double calls = CallsPerSecond(seconds, [&](int) {
    kernels::KdaRecurrentStep(state.data(), q.data(), k.data(), v.data(),
                              alpha.data(), beta.data(), heads, d, out.data());
  });
  return calls * heads;
}

// The per-position work of one head in the decode attention loop (Kimi K3's
// MLA, mla.cc: a latent and a rope dot product per position, then the
// weighted sum of the latent rows in double): a key of key_width floats
// scored, a softmax, a value of value_width floats summed. The key is
// scored as two dot products, value_width and the rest, as MLA does.
double MlaRate(const model::ModelShape& m, double seconds) {
  if (m.attention_layers <= 0) return 0;
  const size_t kvl = std::max(1, m.attention_value_width);
  // The key's part beyond the value (MLA's rope half); none for
  // grouped-query attention, where keys and values are head_dim wide.
  const size_t rope =
      std::max(0, m.attention_key_width - m.attention_value_width);
  std::vector<float> ckv(kMlaPositions * kvl, 0.01f),
      krope(kMlaPositions * rope, 0.01f), q(kvl + rope, 0.02f),
      scores(kMlaPositions);
  std::vector<double> acc(kvl);
  volatile double sink = 0;
  const double calls = CallsPerSecond(seconds, [&](int) {
    for (size_t s = 0; s < kMlaPositions; ++s) {
      scores[s] = static_cast<float>(
          kernels::DotF32(q.data(), ckv.data() + s * kvl, kvl) +
          (rope > 0
               ? kernels::DotF32(q.data() + kvl, krope.data() + s * rope, rope)
               : 0.0));
    }
    kernels::Softmax(scores.data(), kMlaPositions);
    std::fill(acc.begin(), acc.end(), 0.0);
    for (size_t s = 0; s < kMlaPositions; ++s) {
      const float* row = ckv.data() + s * kvl;
      const double w = scores[s];
      for (size_t j = 0; j < kvl; ++j) acc[j] += w * row[j];
    }
    sink = sink + acc[0];
  });
  return calls * kMlaPositions;
}

double ChecksumRate(double seconds) {
  std::vector<uint8_t> bytes(kChecksumBytes);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i);
  volatile uint64_t sink = 0;
  const double calls = CallsPerSecond(seconds, [&](int) {
    sink = sink ^ io::Checksum64(bytes.data(), bytes.size());
  });
  return calls * static_cast<double>(kChecksumBytes);
}

}  // namespace

absl::StatusOr<double> MeasureTrunkRateAtRows(const model::ModelShape& c,
                                              int threads, int rows,
                                              double seconds) {
  if (threads < 1 || threads > 1024 || rows < 1 || rows > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("compute probe: threads ", threads, " and rows ", rows,
                     " must be in [1, 1024] and [1, 64]"));
  }
  kernels::ThreadPool pool(threads);
  double overlap = 0;
  return TrunkMatvecRate(c, &pool, seconds, &overlap,
                         static_cast<size_t>(rows));
}

absl::StatusOr<ComputeRates> MeasureComputeRates(const model::ModelShape& c,
                                                 int threads,
                                                 double seconds_per_probe) {
  if (threads < 1 || threads > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compute probe: threads must be in [1, 1024], got ", threads));
  }
  if (!(seconds_per_probe > 0 && seconds_per_probe <= 60)) {
    return absl::InvalidArgumentError(
        "compute probe: seconds per probe must be in (0, 60]");
  }
  kernels::ThreadPool pool(threads);
  ComputeRates r;
  r.threads = threads;
  r.bf16_bytes_per_s = TrunkMatvecRate(c, &pool, 2 * seconds_per_probe,
                                       &r.expert_overlap_fraction);
  r.mxfp4_bytes_per_s = ExpertRate(c, &pool, seconds_per_probe);
  r.kda_head_steps_per_s = KdaRate(c, seconds_per_probe);
  r.mla_head_positions_per_s = MlaRate(c, seconds_per_probe);
  r.checksum_bytes_per_s = ChecksumRate(seconds_per_probe);
  return r;
}

}  // namespace flotilla::plan
