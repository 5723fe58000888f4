// Grouped-query attention as a shared block (Mixtral, Llama-MoE and
// Qwen3-MoE, whose per-head q/k norms it applies; gpt-oss's sinks, YaRN
// frequencies and sliding layers too): rotate-half RoPE on the query and key
// heads, a key/value cache per layer, causal attention over it (or over the
// last `sliding_window` positions), kv head h / (heads / kv_heads) serving
// query head h. Scores and the softmax in float, the value sum in double: the
// arithmetic of the Hugging Face float32 reference, whatever the thread count.
#ifndef FLOTILLA_COORDINATOR_MODEL_GQA_ATTENTION_H_
#define FLOTILLA_COORDINATOR_MODEL_GQA_ATTENTION_H_

#include <cstddef>
#include <vector>

namespace flotilla::kernels {
class ThreadPool;
}  // namespace flotilla::kernels

namespace flotilla::coordinator {

struct GqaSpec {
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  double rope_theta = 10000;
  int sliding_window = 0;  // 0: attend to the whole context
  // RoPE frequencies (head_dim / 2) when not theta^(-2i/d) (YaRN), and the
  // factor on cos and sin (YaRN's attention factor).
  std::vector<float> inv_freq = {};
  float rope_factor = 1;
};

// Per-head RMSNorm of queries and keys before RoPE (Qwen3): one head_dim
// weight each, shared by every head; null weights: no norm.
struct QkNorm {
  const float* q = nullptr;
  const float* k = nullptr;
  float eps = 0;
};

class GqaAttention {
 public:
  explicit GqaAttention(const GqaSpec& spec);

  // Tokens at positions first_position .. first_position + n - 1: q
  // [n][heads * head_dim] and k [n][kv_heads * head_dim] are rotated in
  // place, k and v appended to the layer's cache (`keys`, `values`:
  // [positions][kv_heads * head_dim]), and attn [n][heads * head_dim]
  // receives each head's attention over positions 0..its own.
  // With `norm`, each query and key head is RMS-normalised first. With
  // `sinks` ([heads], gpt-oss), head h's softmax also runs over one more
  // logit, sinks[h], whose column is then dropped: the weights sum to less
  // than 1 and no value goes with it. `cache_first`: the position of the
  // caches' first row (rows before it dropped by TrimToWindow). `pool`
  // spreads the heads over its threads (null: this thread); the result is
  // the same bits either way.
  void Attend(float* q, float* k, const float* v, size_t n,
              size_t first_position, std::vector<float>* keys,
              std::vector<float>* values, float* attn, const QkNorm& norm = {},
              const float* sinks = nullptr, size_t cache_first = 0,
              kernels::ThreadPool* pool = nullptr) const;

  // With a sliding window W, drops the cache rows no later token can see:
  // every row before next_position - (W - 1), advancing *cache_first. So a
  // sliding layer holds at most W - 1 rows between steps, not the context.
  // Nothing without a window.
  void TrimToWindow(size_t next_position, std::vector<float>* keys,
                    std::vector<float>* values, size_t* cache_first) const;

  const GqaSpec& spec() const { return spec_; }

 private:
  GqaSpec spec_;
  std::vector<float> inv_freq_;  // [head_dim / 2]
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_GQA_ATTENTION_H_
