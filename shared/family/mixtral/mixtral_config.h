// config.json of the Mixtral / Llama-MoE family (model_type "mixtral"):
// grouped-query attention with rotary embeddings, RMSNorm, and a sparse MoE
// of SwiGLU experts behind a softmax top-k router.
#ifndef FLOTILLA_SHARED_FAMILY_MIXTRAL_MIXTRAL_CONFIG_H_
#define FLOTILLA_SHARED_FAMILY_MIXTRAL_MIXTRAL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "shared/model/moe_spec.h"

namespace flotilla::model {

struct MixtralConfig {
  int hidden_size = 0;
  int intermediate_size = 0;  // expert FFN width
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;  // default hidden_size / num_attention_heads
  int vocab_size = 0;
  int max_position_embeddings = 0;
  double rope_theta = 10000;
  float rms_norm_eps = 0;
  int num_local_experts = 0;
  int num_experts_per_tok = 0;
  bool tie_word_embeddings = false;
  int sliding_window = 0;              // 0: attend to the whole context
  std::vector<int32_t> eos_token_ids;  // config.json eos_token_id

  MoeSpec Moe() const {
    MoeSpec m;
    m.num_layers = num_hidden_layers;
    m.first_moe_layer = 0;
    m.num_experts = num_local_experts;
    m.num_experts_per_token = num_experts_per_tok;
    m.hidden_size = hidden_size;
    m.intermediate_size = intermediate_size;
    m.expert_names = {"model.", &kBlockSparseMoeExperts};
    return m;  // infinite clamps: SwiGLU
  }
};

// Parses a config.json object whose model_type is "mixtral". Every bad field
// is named in one InvalidArgument: missing or mistyped fields, heads that do
// not divide hidden_size, kv heads that do not divide heads, top-k above the
// expert count, an activation other than silu, RoPE scaling.
absl::StatusOr<MixtralConfig> ParseMixtralConfig(const nlohmann::json& root,
                                                 absl::string_view source);

}  // namespace flotilla::model

#endif  // FLOTILLA_SHARED_FAMILY_MIXTRAL_MIXTRAL_CONFIG_H_
