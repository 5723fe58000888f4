// The gpt-oss family (model_type "gpt_oss", GptOssForCausalLM): its config,
// plan figures and trunk schema, and the view that presents its fused MXFP4
// experts with biases per expert (gpt_oss_expert_view.h) to every expert
// reader.
#ifndef FLOTILLA_SHARED_FAMILY_GPT_OSS_GPT_OSS_FAMILY_H_
#define FLOTILLA_SHARED_FAMILY_GPT_OSS_GPT_OSS_FAMILY_H_

#include <string>

#include "shared/family/family.h"
#include "shared/family/gpt_oss/gpt_oss_config.h"

namespace flotilla::family {

const Family& GptOssFamily();

class GptOssFamilyConfig : public FamilyConfig {
 public:
  explicit GptOssFamilyConfig(model::GptOssConfig config)
      : config_(std::move(config)) {}

  const Family& family() const override { return GptOssFamily(); }
  model::MoeSpec Moe() const override;
  model::ModelShape Shape() const override;
  std::vector<pack::FieldSpec> LayerSchema(int layer) const override;
  std::vector<pack::FieldSpec> GlobalsSchema() const override;
  std::vector<pack::FieldSpec> VocabSchema(bool lm_head) const override;
  // One expert as released: gate_up [2I][H] and down [H][I] in MXFP4
  // (half a byte per weight and a scale byte per 32), with BF16 biases.
  uint64_t ReleasedExpertRunBytes() const override;
  std::string ReleasedFormats() const override {
    return "BF16 trunk and fused MXFP4 experts with BF16 biases";
  }
  // The fused expert tensors (through ExpertView), then the layer and
  // expert numbering every "model.layers" family checks.
  absl::Status CheckCheckpoint(const model::TensorSource& source,
                               const std::string& source_name) const override;
  // gpt_oss::ExpertView: one expert's tensors cut from the fused ones.
  absl::StatusOr<std::unique_ptr<model::TensorSource>> ExpertView(
      const model::TensorSource& raw) const override;

  const model::GptOssConfig& config() const { return config_; }

 private:
  model::GptOssConfig config_;
};

}  // namespace flotilla::family

#endif  // FLOTILLA_SHARED_FAMILY_GPT_OSS_GPT_OSS_FAMILY_H_
