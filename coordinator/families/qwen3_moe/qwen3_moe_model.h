// The Qwen3-MoE forward pass (Qwen3MoeForCausalLM), after Hugging Face's
// modeling_qwen3_moe.py in float32:
//
//   h = embed(ids)
//   per layer:  a = RMSNorm(h); q, k, v = q_proj a, k_proj a, v_proj a;
//               each q and k head RMS-normalised (q_norm, k_norm), then
//               rotate-half RoPE; h += o_proj(GQA(q, k, v))
//               m = RMSNorm(h)
//               MoE layers: p = softmax(router m); the top k of p (divided
//                 by their sum when norm_topk_prob);
//                 h += sum_e p_e * down_e(silu(gate_e m) * up_e m)
//               dense layers: h += down(silu(gate m) * up m)
//   logits = lm_head(RMSNorm(h))
//
// The trunk is a RegionTrunk (in memory or streamed from a pack); the
// routed experts go through an ExpertBackend (in process, streamed, or on
// expert workers), as for every family.
#ifndef FLOTILLA_COORDINATOR_FAMILIES_QWEN3_MOE_QWEN3_MOE_MODEL_H_
#define FLOTILLA_COORDINATOR_FAMILIES_QWEN3_MOE_QWEN3_MOE_MODEL_H_

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
#include "shared/family/qwen3_moe/qwen3_moe_config.h"
#include "shared/kernels/kernels.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::coordinator {

// One layer bound into its region (qwen3_moe_schema.h).
struct Qwen3MoeLayer : BoundRegion {
  const float* input_norm = nullptr;
  const float* post_norm = nullptr;
  const float* q_norm = nullptr;  // [head_dim]
  const float* k_norm = nullptr;
  kernels::DenseMatrix q, k, v, o;
  bool moe = false;
  kernels::DenseMatrix router;          // MoE layers
  kernels::DenseMatrix gate, up, down;  // dense layers
};

RegionBinder Qwen3MoeBinder(const model::Qwen3MoeConfig& config);

// Every position's keys and values, per layer.
struct Qwen3MoeSequence : public KvCacheSequence {
  std::unique_ptr<ModelSequence> Clone() const override {
    return std::make_unique<Qwen3MoeSequence>(*this);
  }
};

class Qwen3MoeModel : public DecoderModel<Qwen3MoeSequence> {
 public:
  static std::unique_ptr<Qwen3MoeModel> Create(
      const model::Qwen3MoeConfig& config, std::unique_ptr<RegionTrunk> trunk,
      std::unique_ptr<kernels::ThreadPool> pool,
      std::unique_ptr<ExpertBackend> experts, std::shared_ptr<void> keep_alive);

  std::unique_ptr<ModelSequence> StartSequence() const override;
  absl::StatusOr<std::unique_ptr<ModelSequence>> LoadSequence(
      absl::string_view bytes) const override;
  ExpertBackend* experts() override { return experts_.get(); }
  uint64_t resident_trunk_bytes() const override {
    return trunk_->resident_bytes();
  }
  RegionTrunk* trunk() { return trunk_.get(); }

 private:
  explicit Qwen3MoeModel(const model::Qwen3MoeConfig& c)
      : DecoderModel("Qwen3-MoE", c.vocab_size, c.max_position_embeddings),
        config_(c) {}
  absl::Status Step(const std::vector<Qwen3MoeSequence*>& seqs,
                    const std::vector<const std::vector<int32_t>*>& ids,
                    const std::vector<size_t>& out_rows,
                    std::vector<float>* logits) override;
  // The step's rows [step.size()][hidden] -> out, for sequences `seqs`.
  void Attention(const Qwen3MoeLayer& w, int layer, const StepRows& step,
                 const float* normed,
                 const std::vector<Qwen3MoeSequence*>& seqs, float* out);
  absl::Status Ffn(int layer, const Qwen3MoeLayer& w, const float* normed,
                   size_t n, float* out);

  model::Qwen3MoeConfig config_;
  std::shared_ptr<void> keep_alive_;  // destroyed last
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<RegionTrunk> trunk_;
  std::unique_ptr<ExpertBackend> experts_;
  std::unique_ptr<GqaAttention> attention_;
  RouterSpec router_;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_FAMILIES_QWEN3_MOE_QWEN3_MOE_MODEL_H_
