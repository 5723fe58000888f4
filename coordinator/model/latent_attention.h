// Multi-head Latent Attention as a shared block (DeepSeek-V3 / R1, Kimi K2;
// Hugging Face's DeepseekV3Attention): a query made at full rank (q_proj) or
// through a low-rank latent (q_a_proj, RMSNorm, q_b_proj), a key/value
// latent c = RMSNorm(kv_a(x)[:kv_lora]) with one RoPE key shared by every
// head (kv_a(x)[kv_lora:]), per-head keys and values kv_b(c), RoPE on the
// query's and key's rope halves (interleaved pairs as upstream's default,
// or rotate-half), and a softmax scale the config derives (YaRN's mscale).
//
// The cache keeps only c and the rotated shared key per position (the
// latent cache, kv_lora + rope floats); kv_b is absorbed: the query's nope
// half meets c through W_UK^T q, and each head's value is W_UV applied to
// the probability-weighted latent. That is exact in real arithmetic, so it
// matches upstream's explicit keys and values to float rounding. Weights
// may be dense or FP8 with block scales (kernels::WeightMatrix).
#ifndef FLOTILLA_COORDINATOR_MODEL_LATENT_ATTENTION_H_
#define FLOTILLA_COORDINATOR_MODEL_LATENT_ATTENTION_H_

#include <cstddef>
#include <vector>

#include "shared/kernels/thread_pool.h"
#include "shared/kernels/weight_matrix.h"

namespace flotilla::coordinator {

struct LatentAttentionSpec {
  int heads = 0;
  int q_lora_rank = 0;  // 0: the query comes from q_proj at full rank
  int kv_lora_rank = 0;
  int qk_nope_dim = 0;
  int qk_rope_dim = 0;  // even
  int v_dim = 0;
  float q_norm_eps = 1e-6f;
  float kv_norm_eps = 1e-6f;
  double softmax_scale = 0;
  // RoPE: qk_rope_dim / 2 inverse frequencies; cos and sin are multiplied
  // by rope_factor (YaRN's attention factor, 1 without scaling).
  std::vector<float> inv_freq;
  float rope_factor = 1;
  // true: pairs (x0, x1), (x2, x3), ...; false: (x_i, x_{i + rope/2}).
  bool rope_interleaved = true;
};

struct LatentAttentionWeights {
  kernels::WeightMatrix q_proj;  // q_lora_rank == 0
  kernels::WeightMatrix q_a, q_b;
  const float* q_a_norm = nullptr;   // [q_lora_rank]
  kernels::WeightMatrix kv_a;        // [kv_lora + rope][hidden]
  const float* kv_a_norm = nullptr;  // [kv_lora]
  kernels::WeightMatrix kv_b;    // [heads * (nope + v)][kv_lora], per head k|v
  kernels::WeightMatrix o_proj;  // [hidden][heads * v]
};

// One layer's cache in one sequence.
struct LatentCache {
  std::vector<float> c_kv;    // [positions][kv_lora], normalised
  std::vector<float> k_rope;  // [positions][rope], rotated
  size_t positions = 0;

  size_t bytes() const { return (c_kv.capacity() + k_rope.capacity()) * 4; }
};

// `n` new tokens (x: [n][hidden], the normalised input) at positions
// cache->positions onwards attend causally to the cache and themselves;
// they are appended to `cache`. out: [n][hidden].
void LatentAttention(const LatentAttentionSpec& spec,
                     const LatentAttentionWeights& w, const float* x, size_t n,
                     LatentCache* cache, float* out, kernels::ThreadPool* pool);

// Several sequences in one step: sequence i's rows are x rows
// [offsets[i], offsets[i + 1]) (offsets.size() == caches.size() + 1), each
// attending to caches[i]. The projections run over every row at once; each
// row's output is bitwise what LatentAttention gives it alone.
void LatentAttentionRows(const LatentAttentionSpec& spec,
                         const LatentAttentionWeights& w, const float* x,
                         const std::vector<size_t>& offsets,
                         const std::vector<LatentCache*>& caches, float* out,
                         kernels::ThreadPool* pool);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_LATENT_ATTENTION_H_
