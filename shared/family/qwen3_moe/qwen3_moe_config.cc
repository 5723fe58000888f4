#include "shared/family/qwen3_moe/qwen3_moe_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/model/config_fields.h"

namespace flotilla::model {
namespace {

using internal::ConfigFieldReader;
using internal::General;
using Json = nlohmann::json;

// A feature this engine does not run, refused unless off.
void RefuseUnlessOff(const Json& root, const char* key, ConfigFieldReader* r) {
  const auto it = root.find(key);
  if (it == root.end() || it->is_null() || *it == false) return;
  r->AddError(absl::StrCat(key, ": ", it->dump(), " is not supported"));
}

}  // namespace

bool Qwen3MoeConfig::IsMoeLayer(int layer) const {
  if (num_experts <= 0) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) !=
      mlp_only_layers.end()) {
    return false;
  }
  return (layer + 1) % decoder_sparse_step == 0;
}

absl::StatusOr<Qwen3MoeConfig> ParseQwen3MoeConfig(const Json& root,
                                                   absl::string_view source) {
  ConfigFieldReader r(root);
  Qwen3MoeConfig c;
  // Sizes bounded far above the releases (Qwen3-235B-A22B: hidden 4096,
  // 94 layers, 128 experts).
  r.BoundedInt("hidden_size", &c.hidden_size, 1, 1 << 20);
  r.BoundedInt("intermediate_size", &c.intermediate_size, 1, 1 << 20);
  r.BoundedInt("moe_intermediate_size", &c.moe_intermediate_size, 1, 1 << 20);
  r.BoundedInt("num_hidden_layers", &c.num_hidden_layers, 1, 4096);
  r.BoundedInt("num_attention_heads", &c.num_attention_heads, 1, 4096);
  r.BoundedInt("num_key_value_heads", &c.num_key_value_heads, 1, 4096);
  r.BoundedInt("head_dim", &c.head_dim, 2, 4096);
  r.BoundedInt("vocab_size", &c.vocab_size, 1, 1 << 24);
  r.BoundedInt("max_position_embeddings", &c.max_position_embeddings, 1,
               1 << 28);
  r.BoundedInt("num_experts", &c.num_experts, 1, 65536);
  r.BoundedInt("num_experts_per_tok", &c.num_experts_per_tok, 1, 64);
  bool present = false;
  if (const auto step = r.OptionalInt(
          General("decoder_sparse_step", {"decoder_sparse_step"}), &present);
      present && step.has_value()) {
    if (*step < 1) {
      r.AddError(absl::StrCat("decoder_sparse_step: ", *step, " must be >= 1"));
    } else {
      c.decoder_sparse_step = *step;
    }
  }
  if (const auto eps =
          r.RequiredFloat(General("rms_norm_eps", {"rms_norm_eps"}))) {
    if (!(*eps > 0) || !(*eps < 1)) {
      r.AddError(absl::StrCat("rms_norm_eps: ", *eps, " must be in (0, 1)"));
    }
    c.rms_norm_eps = static_cast<float>(*eps);
  }
  if (const auto theta =
          r.RequiredFloat(General("rope_theta", {"rope_theta"}))) {
    if (!(*theta > 0)) r.AddError("rope_theta: must be > 0");
    c.rope_theta = *theta;
  }
  if (const auto v = r.OptionalBool(
          General("norm_topk_prob", {"norm_topk_prob"}), false)) {
    c.norm_topk_prob = *v;
  }
  if (const auto v = r.OptionalBool(
          General("tie_word_embeddings", {"tie_word_embeddings"}), false)) {
    c.tie_word_embeddings = *v;
  }
  if (const auto it = root.find("mlp_only_layers");
      it != root.end() && !it->is_null()) {
    if (!it->is_array()) {
      r.AddError("mlp_only_layers: must be a list of layer indices");
    } else {
      for (const Json& l : *it) {
        if (!l.is_number_integer() || l.get<int64_t>() < 0 ||
            l.get<int64_t>() >= c.num_hidden_layers) {
          r.AddError(absl::StrCat("mlp_only_layers: ", l.dump(),
                                  " is not a layer of 0..",
                                  c.num_hidden_layers - 1));
          break;
        }
        c.mlp_only_layers.push_back(l.get<int>());
      }
    }
  }
  r.CheckGqaMoe(c.num_attention_heads, c.num_key_value_heads, c.head_dim,
                c.num_experts_per_tok, c.num_experts, "num_experts");
  if (const auto it = root.find("hidden_act");
      it != root.end() && *it != "silu") {
    r.AddError(
        absl::StrCat("hidden_act: ", it->dump(), " is not supported (silu)"));
  }
  RefuseUnlessOff(root, "attention_bias", &r);
  RefuseUnlessOff(root, "use_sliding_window", &r);
  RefuseUnlessOff(root, "rope_scaling", &r);
  // Quantized releases (Qwen3-*-FP8) store other tensors than this engine
  // reads: refused by name rather than read as something else.
  if (const auto it = root.find("quantization_config");
      it != root.end() && !it->is_null()) {
    r.AddError(absl::StrCat("quantization_config: ", it->dump(),
                            " is not supported (Qwen3-MoE runs the BF16 "
                            "release)"));
  }
  // Read only when use_sliding_window is on (refused above), but a value
  // of the wrong kind is a broken config all the same.
  for (const char* key : {"sliding_window", "max_window_layers"}) {
    const auto it = root.find(key);
    if (it != root.end() && !it->is_null() &&
        !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
      r.AddError(absl::StrCat(key, ": ", it->dump(),
                              " must be null or a whole number"));
    }
  }
  c.eos_token_ids = internal::EosTokenIds(root);
  FLOTILLA_RETURN_IF_ERROR(r.Finish(source, "Qwen3-MoE"));
  return c;
}

}  // namespace flotilla::model
