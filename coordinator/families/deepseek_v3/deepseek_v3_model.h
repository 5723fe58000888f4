// The DeepSeek-V3 / R1 and Kimi K2 forward pass (DeepseekV3ForCausalLM),
// after Hugging Face's modeling_deepseek_v3.py in float32:
//
//   h = embed(ids)
//   per layer:  h += o_proj(MLA(RMSNorm(h)))       (latent_attention.h)
//               m = RMSNorm(h)
//               dense layers (l < first_k_dense_replace):
//                 h += down(silu(gate m) * up m)
//               MoE layers: s = sigmoid(router m); choose top-k by s + bias
//                 within the topk_group best of n_group groups; weights the
//                 unbiased s, renormalised (norm_topk_prob) and scaled
//                 (routed_scaling_factor);
//                 h += sum_e w_e expert_e(m) + shared(m)
//   logits = lm_head(RMSNorm(h))
//
// Weights are FP8 with block scales or dense (kernels::WeightMatrix); the
// trunk is a RegionTrunk (in memory or streamed from a pack) and the routed
// experts go through an ExpertBackend (in process, streamed, or on expert
// workers), as for every family. The MTP layers are never run.
#ifndef FLOTILLA_COORDINATOR_FAMILIES_DEEPSEEK_V3_DEEPSEEK_V3_MODEL_H_
#define FLOTILLA_COORDINATOR_FAMILIES_DEEPSEEK_V3_DEEPSEEK_V3_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/families/deepseek_v3/deepseek_v3_layer.h"
#include "coordinator/model/decoder_model.h"
#include "coordinator/model/expert_backend.h"
#include "coordinator/model/language_model.h"
#include "coordinator/model/latent_attention.h"
#include "coordinator/model/region_trunk.h"
#include "coordinator/model/router.h"
#include "shared/family/deepseek_v3/deepseek_v3_config.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::coordinator {

// One latent cache per layer.
struct DeepSeekV3Sequence : public ModelSequence {
  std::vector<LatentCache> layers;
  size_t positions = 0;

  size_t bytes() const override;
  std::unique_ptr<ModelSequence> Clone() const override {
    return std::make_unique<DeepSeekV3Sequence>(*this);
  }
  absl::Status Save(std::string* out) const override;
  // Every layer keeps every position's latent row: dropping the rows from
  // `n` on is the state before they were fed (speculation's rejected
  // guesses, a prefix cache's shared beginning).
  bool Truncate(size_t n) override;
  bool PrepareUndo(size_t /*added*/) override { return true; }
  bool RewindsAnywhere() const override { return true; }
};

class DeepSeekV3Model : public DecoderModel<DeepSeekV3Sequence> {
 public:
  // `trunk` was built or opened with DeepSeekV3Binder(config);
  // `keep_alive` (the tensor source the experts read) is destroyed last.
  static std::unique_ptr<DeepSeekV3Model> Create(
      const model::DeepSeekV3Config& config, std::unique_ptr<RegionTrunk> trunk,
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
  explicit DeepSeekV3Model(const model::DeepSeekV3Config& c)
      : DecoderModel("DeepSeek-V3", c.vocab_size, c.max_position_embeddings),
        config_(c) {}
  absl::Status Step(const std::vector<DeepSeekV3Sequence*>& seqs,
                    const std::vector<const std::vector<int32_t>*>& ids,
                    const std::vector<size_t>& out_rows,
                    std::vector<float>* logits) override;
  // out = down(silu(gate x) * up x) over n rows.
  void SwiGlu(const DeepSeekV3Layer& w, const float* x, size_t n, float* out);
  absl::Status Moe(int layer, const DeepSeekV3Layer& w, const float* normed,
                   size_t n, float* out);

  model::DeepSeekV3Config config_;
  std::shared_ptr<void> keep_alive_;  // destroyed last
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<RegionTrunk> trunk_;
  std::unique_ptr<ExpertBackend> experts_;
  LatentAttentionSpec attention_;
  RouterSpec router_;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_FAMILIES_DEEPSEEK_V3_DEEPSEEK_V3_MODEL_H_
