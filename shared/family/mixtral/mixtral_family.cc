#include "shared/family/mixtral/mixtral_family.h"

#include <algorithm>

#include "shared/base/status_macros.h"
#include "shared/family/mixtral/mixtral_schema.h"
#include "shared/pack/region_layout.h"

namespace flotilla::family {
namespace {

absl::StatusOr<std::unique_ptr<FamilyConfig>> ParseMixtralFamily(
    const nlohmann::json& root, const std::string& /*text*/,
    const std::string& source) {
  FLOTILLA_ASSIGN_OR_RETURN(model::MixtralConfig c,
                            model::ParseMixtralConfig(root, source));
  return std::unique_ptr<FamilyConfig>(new MixtralFamilyConfig(std::move(c)));
}

}  // namespace

const Family& MixtralFamily() {
  static const Family* family = new Family{
      .name = "mixtral",
      .model_types = {"mixtral"},
      .model_type_prefixes = {},
      .architectures = {"MixtralForCausalLM"},
      .default_chat_template = "plain",
      .default_without_model_type = false,
      .parse = &ParseMixtralFamily,
  };
  return *family;
}

model::ModelShape MixtralFamilyConfig::Shape() const {
  const model::MixtralConfig& c = config_;
  model::ModelShape s;
  s.num_layers = c.num_hidden_layers;
  s.moe_layers = c.num_hidden_layers;
  s.num_experts = c.num_local_experts;
  s.experts_per_token = c.num_experts_per_tok;
  s.vocab_size = c.vocab_size;
  s.hidden_size = c.hidden_size;
  s.max_positions = c.max_position_embeddings;
  const uint64_t q = static_cast<uint64_t>(c.num_attention_heads) * c.head_dim;
  const uint64_t kv = static_cast<uint64_t>(c.num_key_value_heads) * c.head_dim;
  // Every layer caches a key and a value row per position (float32).
  s.state_bytes_per_position = c.num_hidden_layers * 2 * kv * 4;
  // mixtral_model.cc, per token: h, normed, delta; q and the attention
  // output; k and v; router logits; each routed expert's gate, up and
  // output; the logits.
  const uint64_t floats = 3ull * c.hidden_size + 2 * q + 2 * kv +
                          c.num_local_experts +
                          static_cast<uint64_t>(c.num_experts_per_tok) *
                              (2ull * c.intermediate_size + c.hidden_size) +
                          c.vocab_size;
  s.workspace_bytes_per_token = floats * 4;
  // mixtral_model.cc reads the embedding and lm_head whole; its experts are
  // small beside RAM (stories260k-moe: 5.3 MB).
  s.streams_vocab = false;
  s.cache_experts_when_all_fit = true;
  // Attention and the router come before the routed experts.
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    const pack::RegionLayout layout = pack::PlannedLayout(LayerSchema(layer));
    AddMatmuls(layout, layout.fields.size(), &s.matmuls);
  }
  s.matmuls.push_back(model::TrunkMatmul{model::DType::kBF16,
                                         std::max(1, c.vocab_size),
                                         std::max(1, c.hidden_size), 1, 0});
  s.expert_format = "bf16";
  s.expert_hidden = c.hidden_size;
  s.expert_intermediate = c.intermediate_size;
  s.attention_layers = c.num_hidden_layers;
  s.attention_heads = c.num_attention_heads;
  s.attention_key_width = c.head_dim;
  s.attention_value_width = c.head_dim;
  return s;
}

std::vector<pack::FieldSpec> MixtralFamilyConfig::LayerSchema(int layer) const {
  return family::mixtral::LayerSchema(config_, layer);
}

std::vector<pack::FieldSpec> MixtralFamilyConfig::GlobalsSchema() const {
  return family::mixtral::GlobalsSchema(config_);
}

std::vector<pack::FieldSpec> MixtralFamilyConfig::VocabSchema(
    bool lm_head) const {
  return family::mixtral::VocabSchema(config_, lm_head);
}

uint64_t MixtralFamilyConfig::ReleasedExpertRunBytes() const {
  return 3ull * config_.intermediate_size * config_.hidden_size * 2;
}

}  // namespace flotilla::family
