// DeepSeekV3FamilyConfig::CheckCheckpoint: config and checkpoint agree
// before anything loops over the config's counts.
#include "shared/family/checkpoint_check.h"
#include "shared/family/deepseek_v3/deepseek_v3_family.h"

namespace flotilla::family {

absl::Status DeepSeekV3FamilyConfig::CheckCheckpoint(
    const model::TensorSource& source, const std::string& source_name) const {
  // The MTP layers (num_nextn_predict_layers) are Moe()'s unused trailing
  // layers: recognised, not run.
  return CheckModelLayersCheckpoint(
      *this, source, source_name,
      {"n_routed_experts", "first_k_dense_replace",
       "q_lora_rank, n_shared_experts, first_k_dense_replace and "
       "quantization_config"});
}

}  // namespace flotilla::family
