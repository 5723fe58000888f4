// The gpt-oss forward pass (GptOssForCausalLM), after Hugging Face's
// modeling_gpt_oss.py in float32:
//
//   h = embed(ids)
//   per layer:  a = RMSNorm(h); q, k, v = q_proj a + b_q, k_proj a + b_k,
//               v_proj a + b_v; rotate-half YaRN RoPE (cos and sin times
//               the attention factor); GQA over the causal context, or the
//               last sliding_window positions on "sliding_attention"
//               layers, each head's softmax taking one more logit (its
//               sink) whose weight is dropped; h += o_proj(attn) + b_o
//               m = RMSNorm(h); r = router m + b_r; the top k of r,
//               softmaxed among themselves;
//               h += sum_e w_e (down_e(act(gate_e m + b_g, up_e m + b_u))
//                               + b_d), act the clamped SwiGLU
//   logits = lm_head(RMSNorm(h))
//
// The experts (their biases and activation) are the shared expert code's
// mxfp4_bias format behind an ExpertBackend (in process, streamed from a
// pack, or on expert workers); the trunk is a RegionTrunk, as for every
// family.
#ifndef FLOTILLA_COORDINATOR_FAMILIES_GPT_OSS_GPT_OSS_MODEL_H_
#define FLOTILLA_COORDINATOR_FAMILIES_GPT_OSS_GPT_OSS_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model/decoder_model.h"
#include "coordinator/model/decoder_step.h"
#include "coordinator/model/expert_backend.h"
#include "coordinator/model/gqa_attention.h"
#include "coordinator/model/kv_cache_sequence.h"
#include "coordinator/model/language_model.h"
#include "coordinator/model/layer_source.h"
#include "coordinator/model/region_trunk.h"
#include "coordinator/model/router.h"
#include "shared/family/gpt_oss/gpt_oss_config.h"
#include "shared/kernels/kernels.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::coordinator {

// One layer bound into its region (gpt_oss_schema.h).
struct GptOssLayer : BoundRegion {
  const float* input_norm = nullptr;
  const float* post_norm = nullptr;
  kernels::DenseMatrix q, k, v, o, router;
  const float* q_bias = nullptr;
  const float* k_bias = nullptr;
  const float* v_bias = nullptr;
  const float* o_bias = nullptr;
  const float* router_bias = nullptr;
  const float* sinks = nullptr;  // [num_attention_heads]
};

RegionBinder GptOssBinder(const model::GptOssConfig& config);

// Every position's keys and values on full layers, the last
// sliding_window - 1 on sliding ones.
struct GptOssSequence : public KvCacheSequence {
  std::unique_ptr<ModelSequence> Clone() const override {
    return std::make_unique<GptOssSequence>(*this);
  }
};

class GptOssModel : public DecoderModel<GptOssSequence> {
 public:
  static std::unique_ptr<GptOssModel> Create(
      const model::GptOssConfig& config, std::unique_ptr<RegionTrunk> trunk,
      std::unique_ptr<kernels::ThreadPool> pool,
      std::unique_ptr<ExpertBackend> experts, std::shared_ptr<void> keep_alive);

  std::unique_ptr<ModelSequence> StartSequence() const override;
  absl::StatusOr<std::unique_ptr<ModelSequence>> LoadSequence(
      absl::string_view bytes) const override;
  ExpertBackend* experts() override { return experts_.get(); }
  uint64_t resident_trunk_bytes() const override {
    return trunk_->resident_bytes();
  }

 private:
  explicit GptOssModel(const model::GptOssConfig& c)
      : DecoderModel("gpt-oss", c.vocab_size, c.max_position_embeddings),
        config_(c) {}
  absl::Status Step(const std::vector<GptOssSequence*>& seqs,
                    const std::vector<const std::vector<int32_t>*>& ids,
                    const std::vector<size_t>& out_rows,
                    std::vector<float>* logits) override;
  // Each layer's window into a new sequence (KvCacheSequence::window).
  void SetWindows(GptOssSequence* s) const;
  // The step's rows [step.size()][hidden] -> out, for sequences `seqs`.
  void Attention(const GptOssLayer& w, int layer, const StepRows& step,
                 const float* normed, const std::vector<GptOssSequence*>& seqs,
                 float* out);
  absl::Status Experts(int layer, const GptOssLayer& w, const float* normed,
                       size_t n, float* out);

  model::GptOssConfig config_;
  std::shared_ptr<void> keep_alive_;  // destroyed last
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<RegionTrunk> trunk_;
  std::unique_ptr<ExpertBackend> experts_;
  // Full-context and sliding-window attention; the same YaRN frequencies.
  std::unique_ptr<GqaAttention> full_, sliding_;
  RouterSpec router_;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_FAMILIES_GPT_OSS_GPT_OSS_MODEL_H_
