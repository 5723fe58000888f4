// The Kimi K3 family (model_type "kimi_*", or a flat config without one):
// KDA and MLA attention, latent MoE with SiTU experts in MXFP4.
#ifndef FLOTILLA_SHARED_FAMILY_KIMI_K3_KIMI_K3_FAMILY_H_
#define FLOTILLA_SHARED_FAMILY_KIMI_K3_KIMI_K3_FAMILY_H_

#include "shared/family/family.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"

namespace flotilla::family {

const Family& KimiK3Family();

class KimiK3Config : public FamilyConfig {
 public:
  explicit KimiK3Config(model::K3Config config) : config_(std::move(config)) {}

  const Family& family() const override { return KimiK3Family(); }
  model::MoeSpec Moe() const override { return config_.Moe(); }
  model::ModelShape Shape() const override;
  std::vector<pack::FieldSpec> LayerSchema(int layer) const override;
  std::vector<pack::FieldSpec> GlobalsSchema() const override;
  std::vector<pack::FieldSpec> VocabSchema(bool lm_head) const override;
  uint64_t ReleasedExpertRunBytes() const override;
  std::string ReleasedFormats() const override {
    return "BF16 trunk and MXFP4 experts";
  }
  // pack::CheckK3Checkpoint: layers, experts and trunk tensors both ways.
  absl::Status CheckCheckpoint(const model::TensorSource& source,
                               const std::string& source_name) const override;

  const model::K3Config& config() const { return config_; }

 private:
  model::K3Config config_;
};

}  // namespace flotilla::family

#endif  // FLOTILLA_SHARED_FAMILY_KIMI_K3_KIMI_K3_FAMILY_H_
