#include "shared/family/gpt_oss/gpt_oss_config.h"

#include <cmath>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/model/config_fields.h"

namespace flotilla::model {
namespace {

using internal::ConfigFieldReader;
using internal::General;
using Json = nlohmann::json;

void ParseLayerTypes(const Json& root, ConfigFieldReader* r, GptOssConfig* c) {
  const auto it = root.find("layer_types");
  if (it == root.end() || it->is_null()) {
    // Upstream's default: sliding on even layers, full on odd ones.
    for (int l = 0; l < c->num_hidden_layers; ++l) {
      c->sliding_layers.push_back(l % 2 == 0);
    }
    return;
  }
  if (!it->is_array() ||
      it->size() != static_cast<size_t>(c->num_hidden_layers)) {
    r->AddError(
        absl::StrCat("layer_types: must list num_hidden_layers (",
                     c->num_hidden_layers, ") kinds, got ",
                     it->is_array() ? absl::StrCat(it->size()) : it->dump()));
    return;
  }
  for (const Json& kind : *it) {
    if (kind == "sliding_attention") {
      c->sliding_layers.push_back(true);
    } else if (kind == "full_attention") {
      c->sliding_layers.push_back(false);
    } else {
      r->AddError(absl::StrCat("layer_types: ", kind.dump(),
                               " is not sliding_attention or full_attention"));
      return;
    }
  }
}

void ParseRope(const Json& root, ConfigFieldReader* r, GptOssConfig* c) {
  const auto it = root.find("rope_scaling");
  if (it == root.end() || it->is_null()) return;
  const Json& s = *it;
  const Json type =
      s.is_object()
          ? (s.contains("rope_type") ? s["rope_type"] : s.value("type", Json()))
          : Json();
  if (type != "yarn") {
    r->AddError(
        absl::StrCat("rope_scaling: ", s.dump(), " is not supported (yarn)"));
    return;
  }
  auto number = [&](const char* key, double fallback) {
    const auto v = s.find(key);
    if (v == s.end() || v->is_null()) return fallback;
    if (!v->is_number() || !std::isfinite(v->get<double>())) {
      r->AddError(
          absl::StrCat("rope_scaling.", key, ": must be a finite number"));
      return fallback;
    }
    return v->get<double>();
  };
  c->yarn_factor = number("factor", 1);
  // Checked in range before the cast (a double past int is undefined).
  const double original = number("original_max_position_embeddings", 0);
  c->yarn_original_max_position =
      original >= 1 && original <= (1 << 28) ? static_cast<int>(original) : 0;
  c->yarn_beta_fast = number("beta_fast", 32);
  c->yarn_beta_slow = number("beta_slow", 1);
  if (const auto t = s.find("truncate"); t != s.end()) {
    if (!t->is_boolean()) {
      r->AddError("rope_scaling.truncate: must be true or false");
    } else {
      c->yarn_truncate = t->get<bool>();
    }
  }
  if (!(c->yarn_factor >= 1) || c->yarn_factor > 1024 ||
      c->yarn_original_max_position < 1) {
    r->AddError(
        "rope_scaling: factor must be in 1..1024 and "
        "original_max_position_embeddings a positive integer");
  }
}

// MXFP4 covers the routed experts and nothing else in the release: its
// modules_to_not_convert lists attention, the router, the embedding and
// the head. Another list means other tensors are (or are not) quantized
// than the ones this engine reads as MXFP4.
void CheckModulesNotConverted(const Json& q, ConfigFieldReader* r) {
  const auto it = q.find("modules_to_not_convert");
  if (it == q.end() || it->is_null()) return;
  static const std::set<std::string> kRelease = {
      "model.layers.*.self_attn", "model.layers.*.mlp.router",
      "model.embed_tokens", "lm_head"};
  std::set<std::string> given;
  bool strings = it->is_array();
  if (strings) {
    for (const Json& m : *it) {
      if (!m.is_string()) {
        strings = false;
        break;
      }
      given.insert(m.get<std::string>());
    }
  }
  if (!strings || given != kRelease) {
    r->AddError(absl::StrCat(
        "quantization_config.modules_to_not_convert: ", it->dump(),
        " is not supported (MXFP4 experts only: [\"model.layers.*.self_attn\", "
        "\"model.layers.*.mlp.router\", \"model.embed_tokens\", "
        "\"lm_head\"])"));
  }
}

}  // namespace

absl::StatusOr<GptOssConfig> ParseGptOssConfig(const Json& root,
                                               absl::string_view source) {
  ConfigFieldReader r(root);
  GptOssConfig c;
  // Sizes bounded far above the releases (gpt-oss-120b: hidden 2880, 36
  // layers, 128 experts).
  r.BoundedInt("hidden_size", &c.hidden_size, 1, 1 << 20);
  r.BoundedInt("intermediate_size", &c.intermediate_size, 1, 1 << 20);
  r.BoundedInt("num_hidden_layers", &c.num_hidden_layers, 1, 4096);
  r.BoundedInt("num_attention_heads", &c.num_attention_heads, 1, 4096);
  r.BoundedInt("num_key_value_heads", &c.num_key_value_heads, 1, 4096);
  r.BoundedInt("head_dim", &c.head_dim, 2, 4096);
  r.BoundedInt("vocab_size", &c.vocab_size, 1, 1 << 24);
  r.BoundedInt("max_position_embeddings", &c.max_position_embeddings, 1,
               1 << 28);
  r.BoundedInt("num_local_experts", &c.num_local_experts, 1, 65536);
  r.BoundedInt("num_experts_per_tok", &c.num_experts_per_tok, 1, 64);
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
  if (const auto limit =
          r.RequiredFloat(General("swiglu_limit", {"swiglu_limit"}))) {
    if (!(*limit > 0) || !std::isfinite(*limit)) {
      r.AddError(absl::StrCat("swiglu_limit: ", *limit, " must be > 0"));
    }
    c.swiglu_limit = static_cast<float>(*limit);
  }
  if (const auto v = r.OptionalBool(
          General("tie_word_embeddings", {"tie_word_embeddings"}), false)) {
    c.tie_word_embeddings = *v;
  }
  if (const auto it = root.find("attention_bias");
      it != root.end() && *it != true) {
    r.AddError(absl::StrCat("attention_bias: ", it->dump(),
                            " is not supported (gpt-oss has the biases)"));
  }
  if (c.num_hidden_layers > 0) ParseLayerTypes(root, &r, &c);
  bool any_sliding = false;
  for (bool s : c.sliding_layers) any_sliding = any_sliding || s;
  if (any_sliding) {
    const auto it = root.find("sliding_window");
    if (it == root.end() || !it->is_number_integer() ||
        it->get<int64_t>() < 1 || it->get<int64_t>() > INT32_MAX) {
      r.AddError(
          "sliding_window: sliding_attention layers need a positive "
          "integer window");
    } else {
      c.sliding_window = it->get<int>();
    }
  }
  ParseRope(root, &r, &c);
  if (const auto it = root.find("quantization_config");
      it != root.end() && !it->is_null()) {
    if (!it->is_object() || it->value("quant_method", Json()) != "mxfp4") {
      r.AddError(absl::StrCat("quantization_config: ", it->dump(),
                              " is not supported (mxfp4 experts)"));
    } else {
      c.mxfp4_experts = true;
      CheckModulesNotConverted(*it, &r);
    }
  }
  // The release names top-k twice; the two must agree.
  if (const auto it = root.find("experts_per_token");
      it != root.end() && !it->is_null() &&
      (!it->is_number_integer() ||
       it->get<int64_t>() != c.num_experts_per_tok)) {
    r.AddError(absl::StrCat("experts_per_token: ", it->dump(),
                            " disagrees with num_experts_per_tok ",
                            c.num_experts_per_tok));
  }
  r.CheckGqaMoe(c.num_attention_heads, c.num_key_value_heads, c.head_dim,
                c.num_experts_per_tok, c.num_local_experts,
                "num_local_experts");
  if (c.mxfp4_experts &&
      (c.hidden_size % 32 != 0 || c.intermediate_size % 32 != 0)) {
    r.AddError(absl::StrCat("hidden_size ", c.hidden_size,
                            " and intermediate_size ", c.intermediate_size,
                            " must be multiples of 32 (MXFP4 blocks)"));
  }
  c.eos_token_ids = internal::EosTokenIds(root);
  FLOTILLA_RETURN_IF_ERROR(r.Finish(source, "gpt-oss"));
  return c;
}

}  // namespace flotilla::model
