// The Qwen3-MoE family (model_type "qwen3_moe", architectures
// "Qwen3MoeForCausalLM"): grouped-query attention with per-head q/k norms,
// softmax top-k routed SwiGLU experts, BF16 as released.
#ifndef FLOTILLA_SHARED_FAMILY_QWEN3_MOE_QWEN3_MOE_FAMILY_H_
#define FLOTILLA_SHARED_FAMILY_QWEN3_MOE_QWEN3_MOE_FAMILY_H_

#include <string>

#include "shared/family/family.h"
#include "shared/family/qwen3_moe/qwen3_moe_config.h"

namespace flotilla::family {

const Family& Qwen3MoeFamily();

class Qwen3MoeFamilyConfig : public FamilyConfig {
 public:
  explicit Qwen3MoeFamilyConfig(model::Qwen3MoeConfig config)
      : config_(std::move(config)) {}

  const Family& family() const override { return Qwen3MoeFamily(); }
  model::MoeSpec Moe() const override;
  model::ModelShape Shape() const override;
  std::vector<pack::FieldSpec> LayerSchema(int layer) const override;
  std::vector<pack::FieldSpec> GlobalsSchema() const override;
  std::vector<pack::FieldSpec> VocabSchema(bool lm_head) const override;
  // BF16 experts, as Qwen3-MoE is released.
  uint64_t ReleasedExpertRunBytes() const override;
  std::string ReleasedFormats() const override {
    return "BF16 trunk and BF16 experts";
  }
  absl::Status CheckCheckpoint(const model::TensorSource& source,
                               const std::string& source_name) const override;

  const model::Qwen3MoeConfig& config() const { return config_; }

 private:
  model::Qwen3MoeConfig config_;
};

}  // namespace flotilla::family

#endif  // FLOTILLA_SHARED_FAMILY_QWEN3_MOE_QWEN3_MOE_FAMILY_H_
