// Multi-head latent attention (coordinator/model/latent_attention.h) at
// DeepSeek-V3's shapes, FP8 weights with block scales: one layer's prefill
// of `tokens` new tokens after `cached` cached positions, in tokens per
// second. The weights are random codes (no NaN) with one scale per block;
// what is timed is the block's arithmetic, not the model's numbers.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "coordinator/model/latent_attention.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::coordinator {
namespace {

struct Fp8Weights {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  kernels::WeightMatrix matrix;
};

Fp8Weights Random(size_t rows, size_t cols, std::mt19937* rng) {
  Fp8Weights w;
  w.codes.resize(rows * cols);
  // As quantised weights are (flotilla-bench-kernels' FP8 fill): normal
  // exponents 1..14, one code in 8192 subnormal.
  for (size_t i = 0; i < w.codes.size(); ++i) {
    const uint32_t b = (*rng)();
    const uint32_t exponent = i % 8192 == 4095 ? 0 : 1 + (b >> 3) % 14;
    w.codes[i] = static_cast<uint8_t>((b & 0x87) | (exponent << 3));
  }
  w.scales.assign(((rows + 127) / 128) * ((cols + 127) / 128), 1e-3f);
  w.matrix =
      kernels::WeightMatrix::Fp8({w.codes.data(), w.scales.data(), rows, cols});
  return w;
}

void BM_LatentAttentionDeepSeekV3(benchmark::State& state) {
  const size_t tokens = state.range(0), cached = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  LatentAttentionSpec s;
  s.heads = 128;
  s.q_lora_rank = 1536;
  s.kv_lora_rank = 512;
  s.qk_nope_dim = 128;
  s.qk_rope_dim = 64;
  s.v_dim = 128;
  s.softmax_scale = 0.1;
  s.inv_freq.assign(32, 0.01f);
  const size_t hidden = 7168;
  std::mt19937 rng(1);
  const Fp8Weights q_a = Random(1536, hidden, &rng),
                   q_b = Random(128 * 192, 1536, &rng),
                   kv_a = Random(576, hidden, &rng),
                   kv_b = Random(128 * 256, 512, &rng),
                   o = Random(hidden, 128 * 128, &rng);
  std::vector<float> q_norm(1536, 1.0f), kv_norm(512, 1.0f);
  LatentAttentionWeights w;
  w.q_a = q_a.matrix;
  w.q_b = q_b.matrix;
  w.q_a_norm = q_norm.data();
  w.kv_a = kv_a.matrix;
  w.kv_a_norm = kv_norm.data();
  w.kv_b = kv_b.matrix;
  w.o_proj = o.matrix;
  std::vector<float> x(tokens * hidden), out(tokens * hidden);
  for (float& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  kernels::ThreadPool pool(threads);
  LatentCache warm;
  std::vector<float> cx(cached * hidden, 0.1f), cout(cached * hidden);
  if (cached > 0) {
    LatentAttention(s, w, cx.data(), cached, &warm, cout.data(), &pool);
  }
  for (auto _ : state) {
    LatentCache cache = warm;
    LatentAttention(s, w, x.data(), tokens, &cache, out.data(), &pool);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens),
                         benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_LatentAttentionDeepSeekV3)
    ->ArgNames({"tokens", "cached", "threads"})
    ->Args({1, 256, 2})
    ->Args({32, 0, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace flotilla::coordinator

BENCHMARK_MAIN();
