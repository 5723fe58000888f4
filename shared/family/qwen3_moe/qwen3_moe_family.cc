#include "shared/family/qwen3_moe/qwen3_moe_family.h"

#include <algorithm>

#include "shared/family/checkpoint_check.h"
#include "shared/family/qwen3_moe/qwen3_moe_schema.h"

namespace flotilla::family {

const Family& Qwen3MoeFamily() {
  static const Family* family = new Family{
      .name = "qwen3_moe",
      .model_types = {"qwen3_moe"},
      .model_type_prefixes = {},
      .architectures = {"Qwen3MoeForCausalLM"},
      .default_chat_template = "chatml",
      .default_without_model_type = false,
      .parse = &ParseAs<Qwen3MoeFamilyConfig, &model::ParseQwen3MoeConfig>,
  };
  return *family;
}

model::MoeSpec Qwen3MoeFamilyConfig::Moe() const {
  const model::Qwen3MoeConfig& c = config_;
  model::MoeSpec m;
  m.num_layers = c.num_hidden_layers;
  // Dense layers may sit anywhere (mlp_only_layers, decoder_sparse_step).
  m.first_moe_layer = 0;
  while (m.first_moe_layer < c.num_hidden_layers &&
         !c.IsMoeLayer(m.first_moe_layer)) {
    ++m.first_moe_layer;
  }
  for (int l = m.first_moe_layer; l < c.num_hidden_layers; ++l) {
    if (!c.IsMoeLayer(l)) m.other_dense_layers.push_back(l);
  }
  m.num_experts = c.num_experts;
  m.num_experts_per_token = c.num_experts_per_tok;
  m.hidden_size = c.hidden_size;
  m.intermediate_size = c.moe_intermediate_size;
  m.expert_names.prefix = "model.";
  m.expert_names.scheme = &model::kMlpExperts;
  return m;  // infinite clamps: SwiGLU
}

model::ModelShape Qwen3MoeFamilyConfig::Shape() const {
  const model::Qwen3MoeConfig& c = config_;
  model::ModelShape s;
  s.num_layers = c.num_hidden_layers;
  s.moe_layers = Moe().NumMoeLayers();
  s.num_experts = c.num_experts;
  s.experts_per_token = c.num_experts_per_tok;
  s.vocab_size = c.vocab_size;
  s.hidden_size = c.hidden_size;
  s.max_positions = c.max_position_embeddings;
  const uint64_t q = static_cast<uint64_t>(c.num_attention_heads) * c.head_dim;
  const uint64_t kv = static_cast<uint64_t>(c.num_key_value_heads) * c.head_dim;
  // Every layer caches a key and a value row per position (float32).
  s.state_bytes_per_position = c.num_hidden_layers * 2 * kv * 4;
  // qwen3_moe_model.cc, per token: h, normed, delta; q and the attention
  // output; k and v; router logits; the dense FFN's gate and up, or each
  // routed expert's gate, up and output; the logits.
  const uint64_t ffn =
      std::max<uint64_t>(2ull * c.intermediate_size,
                         static_cast<uint64_t>(c.num_experts_per_tok) *
                             (2ull * c.moe_intermediate_size + c.hidden_size));
  s.workspace_bytes_per_token = (3ull * c.hidden_size + 2 * q + 2 * kv +
                                 c.num_experts + ffn + c.vocab_size) *
                                4;
  // The embedding and lm_head are read whole (qwen3_moe_model.cc).
  s.streams_vocab = false;
  s.cache_experts_when_all_fit = true;
  AddTrunkMatmuls(*this, c.vocab_size, c.hidden_size, &s.matmuls);
  s.expert_format = "bf16";
  s.expert_hidden = c.hidden_size;
  s.expert_intermediate = c.moe_intermediate_size;
  s.attention_layers = c.num_hidden_layers;
  s.attention_heads = c.num_attention_heads;
  s.attention_key_width = c.head_dim;
  s.attention_value_width = c.head_dim;
  return s;
}

std::vector<pack::FieldSpec> Qwen3MoeFamilyConfig::LayerSchema(
    int layer) const {
  return qwen3_moe::LayerSchema(config_, layer);
}

std::vector<pack::FieldSpec> Qwen3MoeFamilyConfig::GlobalsSchema() const {
  return qwen3_moe::GlobalsSchema(config_);
}

std::vector<pack::FieldSpec> Qwen3MoeFamilyConfig::VocabSchema(
    bool lm_head) const {
  return qwen3_moe::VocabSchema(config_, lm_head);
}

uint64_t Qwen3MoeFamilyConfig::ReleasedExpertRunBytes() const {
  return 3ull * config_.moe_intermediate_size * config_.hidden_size * 2;
}

absl::Status Qwen3MoeFamilyConfig::CheckCheckpoint(
    const model::TensorSource& source, const std::string& source_name) const {
  return CheckModelLayersCheckpoint(
      *this, source, source_name,
      {"num_experts", "mlp_only_layers and decoder_sparse_step",
       "num_hidden_layers, mlp_only_layers and decoder_sparse_step"});
}

}  // namespace flotilla::family
