#include "shared/family/deepseek_v3/deepseek_v3_family.h"

#include <algorithm>

#include "shared/experts/expert_codec.h"
#include "shared/family/deepseek_v3/deepseek_v3_schema.h"

namespace flotilla::family {

namespace {

// Working buffers per token, in floats (deepseek_v3_model.cc): the
// residual, normed and delta rows; the query, its latent and the MLA
// output; the dense or shared FFN's gate and up; each routed expert's gate,
// up and output; router scores; the logits.
uint64_t WorkspaceFloatsPerToken(const model::DeepSeekV3Config& c) {
  const uint64_t heads = c.num_attention_heads;
  const uint64_t ffn = std::max<uint64_t>(
      c.intermediate_size,
      static_cast<uint64_t>(c.moe_intermediate_size) * c.n_shared_experts);
  return 3ull * c.hidden_size + heads * (c.qk_head_dim() + c.v_head_dim) +
         c.q_lora_rank + c.kv_lora_rank + c.qk_rope_head_dim + 2 * ffn +
         static_cast<uint64_t>(c.num_experts_per_tok) *
             (2ull * c.moe_intermediate_size + c.hidden_size) +
         c.n_routed_experts + c.vocab_size;
}

}  // namespace

const Family& DeepSeekV3Family() {
  static const Family* family = new Family{
      .name = "deepseek_v3",
      .model_types = {"deepseek_v3", "kimi_k2"},
      .model_type_prefixes = {},
      .architectures = {"DeepseekV3ForCausalLM"},
      .default_chat_template = "plain",
      .default_without_model_type = false,
      .parse = &ParseAs<DeepSeekV3FamilyConfig, &model::ParseDeepSeekV3Config>,
  };
  return *family;
}

model::MoeSpec DeepSeekV3FamilyConfig::Moe() const {
  const model::DeepSeekV3Config& c = config_;
  model::MoeSpec m;
  m.num_layers = c.num_hidden_layers;
  m.first_moe_layer = c.first_k_dense_replace;
  m.num_experts = c.n_routed_experts;
  m.num_experts_per_token = c.num_experts_per_tok;
  m.hidden_size = c.hidden_size;
  m.intermediate_size = c.moe_intermediate_size;
  m.unused_trailing_layers = c.num_nextn_predict_layers;  // the MTP layers
  m.expert_names.prefix = "model.";
  m.expert_names.scheme = &model::kMlpExperts;
  return m;
}

model::ModelShape DeepSeekV3FamilyConfig::Shape() const {
  const model::DeepSeekV3Config& c = config_;
  model::ModelShape s;
  s.num_layers = c.num_hidden_layers;
  s.moe_layers = c.num_hidden_layers -
                 std::min(c.num_hidden_layers, c.first_k_dense_replace);
  s.num_experts = c.n_routed_experts;
  s.experts_per_token = c.num_experts_per_tok;
  s.vocab_size = c.vocab_size;
  s.hidden_size = c.hidden_size;
  s.max_positions = c.max_position_embeddings;
  // Every layer caches the normalised latent and the rotated shared key
  // per position (float32): MLA's latent cache.
  s.state_bytes_per_position = static_cast<uint64_t>(c.num_hidden_layers) *
                               (c.kv_lora_rank + c.qk_rope_head_dim) * 4;
  s.workspace_bytes_per_token = WorkspaceFloatsPerToken(c) * 4;
  // The embedding and lm_head are read whole (deepseek_v3_model.cc).
  s.streams_vocab = false;
  s.cache_experts_when_all_fit = true;
  // Attention, the router and the shared experts all run before the layer
  // waits for its routed experts.
  AddTrunkMatmuls(*this, c.vocab_size, c.hidden_size, &s.matmuls);
  s.expert_format = c.fp8 ? "fp8_e4m3" : "bf16";
  s.expert_hidden = c.hidden_size;
  s.expert_intermediate = c.moe_intermediate_size;
  s.attention_layers = c.num_hidden_layers;
  s.attention_heads = c.num_attention_heads;
  s.attention_key_width = c.kv_lora_rank + c.qk_rope_head_dim;
  s.attention_value_width = c.kv_lora_rank;
  return s;
}

std::vector<pack::FieldSpec> DeepSeekV3FamilyConfig::LayerSchema(
    int layer) const {
  return deepseek_v3::LayerSchema(config_, layer);
}

std::vector<pack::FieldSpec> DeepSeekV3FamilyConfig::GlobalsSchema() const {
  return deepseek_v3::GlobalsSchema(config_);
}

std::vector<pack::FieldSpec> DeepSeekV3FamilyConfig::VocabSchema(
    bool lm_head) const {
  return deepseek_v3::VocabSchema(config_, lm_head);
}

uint64_t DeepSeekV3FamilyConfig::ReleasedExpertRunBytes() const {
  const experts::ExpertCodec& codec = experts::CodecOf(
      config_.fp8 ? experts::ExpertFormat::kFp8 : experts::ExpertFormat::kBF16);
  const uint64_t i = config_.moe_intermediate_size, h = config_.hidden_size;
  return 2 * codec.MatrixBytes(i, h) + codec.MatrixBytes(h, i);
}

std::string DeepSeekV3FamilyConfig::ReleasedFormats() const {
  return config_.fp8 ? "FP8 e4m3 trunk and experts (128x128 block scales), "
                       "BF16 embeddings, norms and router"
                     : "BF16 trunk and BF16 experts";
}

}  // namespace flotilla::family
