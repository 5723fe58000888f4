// The Mixtral / Llama-MoE family (model_type "mixtral"): grouped-query
// attention with RoPE, softmax top-k router, SwiGLU experts.
#ifndef FLOTILLA_SHARED_FAMILY_MIXTRAL_MIXTRAL_FAMILY_H_
#define FLOTILLA_SHARED_FAMILY_MIXTRAL_MIXTRAL_FAMILY_H_

#include "shared/family/family.h"
#include "shared/family/mixtral/mixtral_config.h"

namespace flotilla::family {

const Family& MixtralFamily();

class MixtralFamilyConfig : public FamilyConfig {
 public:
  explicit MixtralFamilyConfig(model::MixtralConfig config)
      : config_(std::move(config)) {}

  const Family& family() const override { return MixtralFamily(); }
  model::MoeSpec Moe() const override { return config_.Moe(); }
  model::ModelShape Shape() const override;
  std::vector<pack::FieldSpec> LayerSchema(int layer) const override;
  std::vector<pack::FieldSpec> GlobalsSchema() const override;
  std::vector<pack::FieldSpec> VocabSchema(bool lm_head) const override;
  // BF16 experts, as Mixtral is released.
  uint64_t ReleasedExpertRunBytes() const override;
  std::string ReleasedFormats() const override {
    return "BF16 trunk and BF16 experts";
  }

  const model::MixtralConfig& config() const { return config_; }

 private:
  model::MixtralConfig config_;
};

}  // namespace flotilla::family

#endif  // FLOTILLA_SHARED_FAMILY_MIXTRAL_MIXTRAL_FAMILY_H_
