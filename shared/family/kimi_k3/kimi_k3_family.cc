#include "shared/family/kimi_k3/kimi_k3_family.h"

#include <algorithm>

#include "shared/base/status_macros.h"
#include "shared/family/kimi_k3/kimi_k3_checkpoint_check.h"
#include "shared/family/kimi_k3/kimi_k3_schema.h"
#include "shared/pack/region_layout.h"

namespace flotilla::family {
namespace {

absl::StatusOr<std::unique_ptr<FamilyConfig>> Parse(
    const nlohmann::json& /*root*/, const std::string& text,
    const std::string& source) {
  FLOTILLA_ASSIGN_OR_RETURN(model::K3Config c,
                            model::ParseK3Config(text, source));
  return std::unique_ptr<FamilyConfig>(new KimiK3Config(std::move(c)));
}

// Working buffers per token, in floats: the largest per-token activation
// footprint of one layer: the residual streams (blocks + partial +
// temporaries), the KDA projections, MLA queries, the dense FFN and the
// MoE latent/shared buffers, the router and the logits.
uint64_t WorkspaceFloatsPerToken(const model::K3Config& c) {
  const uint64_t e = c.hidden_size;
  const uint64_t p = static_cast<uint64_t>(c.kda_num_heads) * c.kda_head_dim;
  const uint64_t blocks =
      c.num_hidden_layers / std::max(1, c.attn_res_block_size) + 2;
  const uint64_t mla_q =
      static_cast<uint64_t>(c.num_attention_heads) *
      (c.qk_nope_head_dim + c.qk_rope_head_dim + c.v_head_dim);
  const uint64_t ffn = std::max<uint64_t>(
      3ull * c.intermediate_size * (c.first_k_dense_replace > 0),
      3ull * c.moe_intermediate_size * std::max(1, c.num_shared_experts));
  const uint64_t experts =
      static_cast<uint64_t>(c.num_experts_per_token) *
      (c.routed_expert_hidden_size * 2 + c.moe_intermediate_size * 3);
  return (blocks + 5) * e + 9 * p + 2 * mla_q + ffn + experts + c.num_experts +
         c.vocab_size;
}

}  // namespace

const Family& KimiK3Family() {
  static const Family* family = new Family{
      .name = "kimi_k3",
      .model_types = {},
      .model_type_prefixes = {"kimi"},
      .architectures = {},
      .default_chat_template = "kimi",
      .default_without_model_type = true,
      .parse = &Parse,
  };
  return *family;
}

model::ModelShape KimiK3Config::Shape() const {
  const model::K3Config& c = config_;
  model::ModelShape s;
  s.num_layers = c.num_hidden_layers;
  s.moe_layers = c.num_hidden_layers -
                 std::min(c.num_hidden_layers, c.first_k_dense_replace);
  s.num_experts = c.num_experts;
  s.experts_per_token = c.num_experts_per_token;
  s.vocab_size = c.vocab_size;
  s.hidden_size = c.hidden_size;
  // MLA layers cache a latent and a rope key per position; KDA layers keep
  // a D x D state per head and the short convolutions' last K-1 inputs.
  const uint64_t p = static_cast<uint64_t>(c.kda_num_heads) * c.kda_head_dim;
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    if (c.IsMlaLayer(layer)) {
      s.state_bytes_per_position += (c.kv_lora_rank + c.qk_rope_head_dim) * 4;
      ++s.attention_layers;
    } else {
      s.fixed_state_bytes +=
          (p * c.kda_head_dim + 3 * p * (c.short_conv_kernel_size - 1)) * 4;
      ++s.recurrent_layers;
    }
  }
  s.workspace_bytes_per_token = WorkspaceFloatsPerToken(c) * 4;
  // A MoE layer computes latent_up and the shared experts after its routed
  // experts (moe.cc); everything before them overlaps the experts' reads.
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    const pack::RegionLayout layout = pack::PlannedLayout(LayerSchema(layer));
    size_t before = 0;
    if (!c.IsDenseLayer(layer)) {
      while (before < layout.fields.size() &&
             layout.fields[before].name != "latent_up" &&
             layout.fields[before].name != "shared_gate") {
        ++before;
      }
    }
    AddMatmuls(layout, before, &s.matmuls);
  }
  s.matmuls.push_back(model::TrunkMatmul{model::DType::kBF16,
                                         std::max(1, c.vocab_size),
                                         std::max(1, c.hidden_size), 1, 0});
  s.expert_format = "mxfp4";
  s.expert_hidden = c.routed_expert_hidden_size;
  s.expert_intermediate = c.moe_intermediate_size;
  s.recurrent_heads = c.kda_num_heads;
  s.recurrent_head_dim = c.kda_head_dim;
  s.attention_heads = c.num_attention_heads;
  s.attention_key_width = c.kv_lora_rank + c.qk_rope_head_dim;
  s.attention_value_width = c.kv_lora_rank;
  return s;
}

std::vector<pack::FieldSpec> KimiK3Config::LayerSchema(int layer) const {
  return family::kimi_k3::LayerSchema(config_, layer, pack::kAllLayerParts);
}

std::vector<pack::FieldSpec> KimiK3Config::GlobalsSchema() const {
  return family::kimi_k3::GlobalsSchema(config_);
}

std::vector<pack::FieldSpec> KimiK3Config::VocabSchema(bool lm_head) const {
  return family::kimi_k3::VocabSchema(config_, lm_head);
}

absl::Status KimiK3Config::CheckCheckpoint(
    const model::TensorSource& source, const std::string& source_name) const {
  return family::kimi_k3::CheckCheckpoint(config_, source, source_name);
}

// MXFP4: w1 and w3 [I][L], w2 [L][I], each packed (cols/2 bytes per row)
// plus scales (cols/32 per row).
uint64_t KimiK3Config::ReleasedExpertRunBytes() const {
  const uint64_t i = config_.moe_intermediate_size;
  const uint64_t l = config_.routed_expert_hidden_size;
  return 2 * i * (l / 2 + l / 32) + l * (i / 2 + i / 32);
}

}  // namespace flotilla::family
