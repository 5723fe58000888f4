// The Mixtral / Llama-MoE forward pass (model_type "mixtral"), after HF
// transformers' MixtralForCausalLM:
//
//   h = embed(ids)
//   per layer:  a = RMSNorm(h); h += o_proj(Attention(RoPE(q(a)), RoPE(k(a)),
//               v(a)))  (grouped-query, causal, rotate-half RoPE)
//               m = RMSNorm(h); p = softmax(gate(m)); keep the top k of p,
//               renormalised to sum 1; h += sum_e p_e * expert_e(m)
//   logits = lm_head(RMSNorm(h))   (lm_head = embed when tied)
//
// The trunk (attention, norms, routers, embeddings) comes from a
// MixtralTrunk (in memory, or streamed layer by layer from a pack); the
// routed experts go through an ExpertBackend, so they run in process,
// stream from disk or run on expert workers exactly as Kimi K3's do. Dot
// products accumulate in double (kernels.h), so results do not depend on the
// thread count or the backend.
#ifndef FLOTILLA_COORDINATOR_FAMILIES_MIXTRAL_MIXTRAL_MODEL_H_
#define FLOTILLA_COORDINATOR_FAMILIES_MIXTRAL_MIXTRAL_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/families/mixtral/mixtral_trunk.h"
#include "coordinator/model/expert_backend.h"
#include "coordinator/model/gqa_attention.h"
#include "coordinator/model/kv_cache_sequence.h"
#include "coordinator/model/language_model.h"
#include "shared/family/mixtral/mixtral_config.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::coordinator {

// Every position's keys and values, per layer (a sliding window only
// masks).
struct MixtralSequence : public KvCacheSequence {
  std::unique_ptr<ModelSequence> Clone() const override {
    return std::make_unique<MixtralSequence>(*this);
  }
};

class MixtralModel : public LanguageModel {
 public:
  // `trunk` holds the non-expert weights, `experts` computes the routed
  // experts; `keep_alive` (e.g. the tensor source the experts read) is
  // destroyed after both.
  static std::unique_ptr<MixtralModel> Create(
      const model::MixtralConfig& config, std::unique_ptr<MixtralTrunk> trunk,
      std::unique_ptr<kernels::ThreadPool> pool,
      std::unique_ptr<ExpertBackend> experts, std::shared_ptr<void> keep_alive);

  const model::MixtralConfig& config() const { return config_; }

  int vocab_size() const override { return config_.vocab_size; }
  std::unique_ptr<ModelSequence> StartSequence() const override;
  absl::StatusOr<std::unique_ptr<ModelSequence>> LoadSequence(
      absl::string_view bytes) const override;
  absl::Status Forward(ModelSequence* sequence, const std::vector<int32_t>& ids,
                       bool all_positions, std::vector<float>* logits) override;
  // Each layer is acquired once and each MoE layer's experts are computed
  // in one backend call for all the sequences' rows; attention stays per
  // sequence.
  absl::Status ForwardBatch(
      const std::vector<ModelSequence*>& sequences,
      const std::vector<std::vector<int32_t>>& ids,
      std::vector<std::vector<float>>* last_logits) override;
  ExpertBackend* experts() override { return experts_.get(); }
  int max_positions() const override { return config_.max_position_embeddings; }
  uint64_t resident_trunk_bytes() const override {
    return trunk_->resident_bytes();
  }
  MixtralTrunk* trunk() { return trunk_.get(); }

 private:
  MixtralModel() = default;
  // The sequence as a Mixtral one, after checking `ids` fit it.
  absl::StatusOr<MixtralSequence*> CheckInput(
      ModelSequence* sequence, const std::vector<int32_t>& ids) const;
  // One forward step of seqs[i] over *ids[i] (rows concatenated in that
  // order); `logits` gets [out_rows.size()][vocab] for the step rows listed.
  absl::Status Step(const std::vector<MixtralSequence*>& seqs,
                    const std::vector<const std::vector<int32_t>*>& ids,
                    const std::vector<size_t>& out_rows,
                    std::vector<float>* logits);
  absl::Status Attention(const MixtralLayerView& w, int layer,
                         const float* normed, size_t n, MixtralSequence* seq,
                         float* out);
  absl::Status Moe(int layer, const MixtralLayerView& w, const float* normed,
                   size_t n, float* out);

  model::MixtralConfig config_;
  std::shared_ptr<void> keep_alive_;  // destroyed last
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<MixtralTrunk> trunk_;
  std::unique_ptr<ExpertBackend> experts_;
  std::unique_ptr<GqaAttention> attention_;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_FAMILIES_MIXTRAL_MIXTRAL_MODEL_H_
