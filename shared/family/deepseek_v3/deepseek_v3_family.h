// The DeepSeek-V3 / R1 and Kimi K2 family (model_type "deepseek_v3" or
// "kimi_k2", architectures "DeepseekV3ForCausalLM"): MLA with a low-rank
// query and YaRN RoPE, dense SwiGLU layers, then MoE layers of routed SwiGLU
// experts behind a group-limited sigmoid router plus shared experts; FP8
// e4m3 weights with 128x128 block scales as released.
#ifndef FLOTILLA_SHARED_FAMILY_DEEPSEEK_V3_DEEPSEEK_V3_FAMILY_H_
#define FLOTILLA_SHARED_FAMILY_DEEPSEEK_V3_DEEPSEEK_V3_FAMILY_H_

#include <string>

#include "shared/family/deepseek_v3/deepseek_v3_config.h"
#include "shared/family/family.h"

namespace flotilla::family {

const Family& DeepSeekV3Family();

class DeepSeekV3FamilyConfig : public FamilyConfig {
 public:
  explicit DeepSeekV3FamilyConfig(model::DeepSeekV3Config config)
      : config_(std::move(config)) {}

  const Family& family() const override { return DeepSeekV3Family(); }
  model::MoeSpec Moe() const override;
  model::ModelShape Shape() const override;
  std::vector<pack::FieldSpec> LayerSchema(int layer) const override;
  std::vector<pack::FieldSpec> GlobalsSchema() const override;
  std::vector<pack::FieldSpec> VocabSchema(bool lm_head) const override;
  uint64_t ReleasedExpertRunBytes() const override;
  std::string ReleasedFormats() const override;
  // The tensors name layers 0..num_hidden_layers-1 plus the MTP layers
  // (num_nextn_predict_layers, recognised and left unread), routed experts
  // 0..n_routed_experts-1 exactly in the MoE layers, and nothing else the
  // schema does not read.
  absl::Status CheckCheckpoint(const model::TensorSource& source,
                               const std::string& source_name) const override;

  const model::DeepSeekV3Config& config() const { return config_; }

 private:
  model::DeepSeekV3Config config_;
};

}  // namespace flotilla::family

#endif  // FLOTILLA_SHARED_FAMILY_DEEPSEEK_V3_DEEPSEEK_V3_FAMILY_H_
