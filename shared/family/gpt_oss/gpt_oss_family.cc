#include "shared/family/gpt_oss/gpt_oss_family.h"

#include "absl/strings/str_cat.h"
#include "shared/family/checkpoint_check.h"
#include "shared/family/gpt_oss/gpt_oss_expert_view.h"
#include "shared/family/gpt_oss/gpt_oss_schema.h"

namespace flotilla::family {

const Family& GptOssFamily() {
  static const Family* family = new Family{
      .name = "gpt_oss",
      .model_types = {"gpt_oss"},
      .model_type_prefixes = {},
      .architectures = {"GptOssForCausalLM"},
      .default_chat_template = "plain",
      .default_without_model_type = false,
      .parse = &ParseAs<GptOssFamilyConfig, &model::ParseGptOssConfig>,
  };
  return *family;
}

model::MoeSpec GptOssFamilyConfig::Moe() const {
  const model::GptOssConfig& c = config_;
  model::MoeSpec m;
  m.num_layers = c.num_hidden_layers;
  m.num_experts = c.num_local_experts;
  m.num_experts_per_token = c.num_experts_per_tok;
  m.hidden_size = c.hidden_size;
  m.intermediate_size = c.intermediate_size;
  // The names ExpertView gives each expert's cut of the release's fused
  // tensors (mlp.experts.gate_up_proj_blocks, ...).
  m.expert_names.prefix = "model.";
  m.expert_names.scheme = &model::kMlpExperts;
  // config.swiglu_limit, as the release's MXFP4 kernels read it
  // (modeling_gpt_oss.py's eager path writes 7.0, the released value);
  // alpha is 1.702 in both.
  m.swiglu_limit = c.swiglu_limit;
  m.swiglu_alpha = 1.702f;
  m.expert_biases = true;
  return m;
}

model::ModelShape GptOssFamilyConfig::Shape() const {
  const model::GptOssConfig& c = config_;
  model::ModelShape s;
  s.num_layers = c.num_hidden_layers;
  s.moe_layers = c.num_hidden_layers;
  s.num_experts = c.num_local_experts;
  s.experts_per_token = c.num_experts_per_tok;
  s.vocab_size = c.vocab_size;
  s.hidden_size = c.hidden_size;
  s.max_positions = c.max_position_embeddings;
  // Full-attention layers keep every position's key and value; sliding
  // ones only the window's.
  const uint64_t kv =
      static_cast<uint64_t>(c.num_key_value_heads) * c.head_dim * 2 * 4;
  for (bool sliding : c.sliding_layers) {
    if (sliding) {
      s.fixed_state_bytes += kv * c.sliding_window;
    } else {
      s.state_bytes_per_position += kv;
    }
  }
  const uint64_t q = static_cast<uint64_t>(c.num_attention_heads) * c.head_dim;
  s.workspace_bytes_per_token =
      (3ull * c.hidden_size + 2 * q + kv / 4 + c.num_local_experts +
       static_cast<uint64_t>(c.num_experts_per_tok) *
           (3ull * c.intermediate_size + c.hidden_size) +
       c.vocab_size) *
      4;
  s.streams_vocab = false;
  s.cache_experts_when_all_fit = true;
  AddTrunkMatmuls(*this, c.vocab_size, c.hidden_size, &s.matmuls);
  s.expert_format = "mxfp4_bias";
  s.expert_hidden = c.hidden_size;
  s.expert_intermediate = c.intermediate_size;
  s.attention_layers = c.num_hidden_layers;
  s.attention_heads = c.num_attention_heads;
  s.attention_key_width = c.head_dim;
  s.attention_value_width = c.head_dim;
  return s;
}

std::vector<pack::FieldSpec> GptOssFamilyConfig::LayerSchema(int layer) const {
  return gpt_oss::LayerSchema(config_, layer);
}

std::vector<pack::FieldSpec> GptOssFamilyConfig::GlobalsSchema() const {
  return gpt_oss::GlobalsSchema(config_);
}

std::vector<pack::FieldSpec> GptOssFamilyConfig::VocabSchema(
    bool lm_head) const {
  return gpt_oss::VocabSchema(config_, lm_head);
}

uint64_t GptOssFamilyConfig::ReleasedExpertRunBytes() const {
  const uint64_t h = config_.hidden_size, i = config_.intermediate_size;
  const uint64_t gate_up = 2 * i * (h / 2 + h / 32) + 2 * i * 2;
  const uint64_t down = h * (i / 2 + i / 32) + h * 2;
  return gate_up + down;
}

absl::Status GptOssFamilyConfig::CheckCheckpoint(
    const model::TensorSource& source, const std::string& source_name) const {
  absl::StatusOr<std::unique_ptr<gpt_oss::ExpertView>> view =
      gpt_oss::ExpertView::Create(source, config_);
  if (!view.ok()) {
    return absl::Status(
        view.status().code(),
        absl::StrCat(source_name, ": ", view.status().message()));
  }
  return CheckModelLayersCheckpoint(
      *this, **view, source_name,
      {"num_local_experts", "num_hidden_layers", "num_hidden_layers"});
}

absl::StatusOr<std::unique_ptr<model::TensorSource>>
GptOssFamilyConfig::ExpertView(const model::TensorSource& raw) const {
  absl::StatusOr<std::unique_ptr<gpt_oss::ExpertView>> view =
      gpt_oss::ExpertView::Create(raw, config_);
  if (!view.ok()) return view.status();
  return std::unique_ptr<model::TensorSource>(std::move(*view));
}

}  // namespace flotilla::family
