#include "shared/family/deepseek_v3/deepseek_v3_config.h"

#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shared/base/status_macros.h"
#include "shared/model/config_fields.h"

namespace flotilla::model {
namespace {

using internal::ConfigFieldReader;
using internal::General;
using Json = nlohmann::json;

// YaRN's attention factor: 0.1 * mscale * ln(factor) + 1 above factor 1.
double YarnMscale(double factor, double mscale) {
  return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

// A number field of rope_scaling (or `fallback` when absent).
std::optional<double> ScalingNumber(const Json& s, const char* key,
                                    double fallback, ConfigFieldReader* r) {
  const auto it = s.find(key);
  if (it == s.end() || it->is_null()) return fallback;
  if (!it->is_number() || !std::isfinite(it->get<double>())) {
    r->AddError(
        absl::StrCat("rope_scaling.", key, ": must be a finite number"));
    return std::nullopt;
  }
  return it->get<double>();
}

void ParseRopeScaling(const Json& root, ConfigFieldReader* r,
                      DeepSeekV3Config* c) {
  const auto it = root.find("rope_scaling");
  if (it == root.end() || it->is_null()) return;
  const Json& s = *it;
  if (!s.is_object()) {
    r->AddError("rope_scaling: must be null or an object");
    return;
  }
  const Json type =
      s.contains("rope_type") ? s["rope_type"] : s.value("type", Json());
  if (type != "yarn") {
    r->AddError(absl::StrCat("rope_scaling: type ", type.dump(),
                             " is not supported (yarn)"));
    return;
  }
  const auto factor = ScalingNumber(s, "factor", 1, r);
  const auto original =
      ScalingNumber(s, "original_max_position_embeddings", 0, r);
  const auto fast = ScalingNumber(s, "beta_fast", 32, r);
  const auto slow = ScalingNumber(s, "beta_slow", 1, r);
  const auto mscale = ScalingNumber(s, "mscale", 1, r);
  const auto all_dim = ScalingNumber(s, "mscale_all_dim", 0, r);
  if (!factor || !original || !fast || !slow || !mscale || !all_dim) return;
  // Bounded far above the releases (DeepSeek-V3 40, Kimi K2 32 and 64).
  if (!(*factor >= 1) || *factor > 1024) {
    r->AddError(
        absl::StrCat("rope_scaling.factor: ", *factor, " must be in 1..1024"));
  }
  if (!(*mscale > 0) || *mscale > 100) {
    r->AddError(
        absl::StrCat("rope_scaling.mscale: ", *mscale, " must be in (0, 100]"));
  }
  if (!(*all_dim >= 0) || *all_dim > 100) {
    r->AddError(absl::StrCat("rope_scaling.mscale_all_dim: ", *all_dim,
                             " must be in [0, 100]"));
  }
  if (*original > (1 << 28)) {
    r->AddError(absl::StrCat("rope_scaling.original_max_position_embeddings: ",
                             *original, " is above 268435456"));
  }
  if (!(*original >= 1) || *original != std::floor(*original)) {
    r->AddError(
        "rope_scaling.original_max_position_embeddings: must be a "
        "positive integer");
  }
  // Equal betas are released (Kimi K2: 1 and 1); upstream then widens the
  // ramp by 0.001.
  if (!(*fast >= *slow) || !(*slow > 0)) {
    r->AddError(
        "rope_scaling: beta_fast must be at least beta_slow, and "
        "both positive");
  }
  c->yarn_factor = *factor;
  c->yarn_original_max_position = *original >= 1 && *original <= (1 << 28)
                                      ? static_cast<int>(*original)
                                      : 0;
  c->yarn_beta_fast = *fast;
  c->yarn_beta_slow = *slow;
  c->yarn_mscale = *mscale;
  c->yarn_mscale_all_dim = *all_dim;
}

void ParseQuantization(const Json& root, ConfigFieldReader* r,
                       DeepSeekV3Config* c) {
  const auto it = root.find("quantization_config");
  if (it == root.end() || it->is_null()) return;
  const Json& q = *it;
  if (!q.is_object() || q.value("quant_method", Json()) != "fp8" ||
      q.value("fmt", Json("e4m3")) != "e4m3" ||
      q.value("weight_block_size", Json()) != Json::array({128, 128})) {
    r->AddError(absl::StrCat(
        "quantization_config: ", q.dump(),
        " is not supported (FP8 e4m3 with weight_block_size [128, 128])"));
    return;
  }
  c->fp8 = true;
}

}  // namespace

double DeepSeekV3Config::SoftmaxScale() const {
  double scale = 1.0 / std::sqrt(static_cast<double>(qk_head_dim()));
  if (yarn_mscale_all_dim != 0) {
    const double m = YarnMscale(yarn_factor, yarn_mscale_all_dim);
    scale *= m * m;
  }
  return scale;
}

absl::StatusOr<DeepSeekV3Config> ParseDeepSeekV3Config(
    const nlohmann::json& root, absl::string_view source) {
  ConfigFieldReader r(root);
  DeepSeekV3Config c;
  // Sizes bounded far above the releases (DeepSeek-V3: hidden 7168, vocab
  // 129280), so the planner's byte counts fit 64 bits.
  r.BoundedInt("hidden_size", &c.hidden_size, 1, 1 << 20);
  r.BoundedInt("intermediate_size", &c.intermediate_size, 1, 1 << 20);
  r.BoundedInt("moe_intermediate_size", &c.moe_intermediate_size, 1, 1 << 20);
  r.BoundedInt("num_hidden_layers", &c.num_hidden_layers, 1, 4096);
  r.BoundedInt("num_attention_heads", &c.num_attention_heads, 1, 4096);
  r.BoundedInt("vocab_size", &c.vocab_size, 1, 1 << 24);
  r.BoundedInt("max_position_embeddings", &c.max_position_embeddings, 1,
               1 << 28);
  r.BoundedInt("kv_lora_rank", &c.kv_lora_rank, 1, 1 << 20);
  r.BoundedInt("qk_nope_head_dim", &c.qk_nope_head_dim, 0, 4096);
  r.BoundedInt("qk_rope_head_dim", &c.qk_rope_head_dim, 2, 4096);
  r.BoundedInt("v_head_dim", &c.v_head_dim, 1, 4096);
  r.BoundedInt("n_routed_experts", &c.n_routed_experts, 1, 65536);
  r.BoundedInt("n_shared_experts", &c.n_shared_experts, 0, 64);
  r.BoundedInt("num_experts_per_tok", &c.num_experts_per_tok, 1, 64);
  r.BoundedInt("n_group", &c.n_group, 1, 1 << 20);
  r.BoundedInt("topk_group", &c.topk_group, 1, 1 << 20);
  r.BoundedInt("first_k_dense_replace", &c.first_k_dense_replace, 0, 1 << 20);
  if (c.qk_rope_head_dim % 2 != 0) {
    r.AddError(absl::StrCat("qk_rope_head_dim: ", c.qk_rope_head_dim,
                            " must be even (RoPE rotates pairs)"));
  }
  bool present = false;
  if (const auto q =
          r.OptionalInt(General("q_lora_rank", {"q_lora_rank"}), &present);
      present && q.has_value()) {
    if (*q < 1 || *q > (1 << 20)) {
      r.AddError(absl::StrCat("q_lora_rank: ", *q, " must be in 1..1048576"));
    }
    c.q_lora_rank = *q;
  }
  if (const auto n = r.OptionalInt(
          General("num_nextn_predict_layers", {"num_nextn_predict_layers"}),
          &present);
      present && n.has_value()) {
    if (*n < 0) r.AddError("num_nextn_predict_layers: must be >= 0");
    c.num_nextn_predict_layers = *n;
  }
  if (const auto freq = r.OptionalInt(
          General("moe_layer_freq", {"moe_layer_freq"}), &present);
      present && freq.has_value() && *freq != 1) {
    r.AddError(absl::StrCat("moe_layer_freq: ", *freq,
                            " is not supported (every layer past "
                            "first_k_dense_replace is MoE: 1)"));
  }
  if (const auto kv = r.OptionalInt(
          General("num_key_value_heads", {"num_key_value_heads"}), &present);
      present && kv.has_value() && *kv != c.num_attention_heads) {
    r.AddError(absl::StrCat("num_key_value_heads: ", *kv,
                            " differs from num_attention_heads (MLA has one "
                            "key/value head per query head)"));
  }
  if (const auto eps =
          r.RequiredFloat(General("rms_norm_eps", {"rms_norm_eps"}))) {
    if (!(*eps > 0) || !(*eps < 1)) {
      r.AddError(absl::StrCat("rms_norm_eps: ", *eps, " must be in (0, 1)"));
    }
    c.rms_norm_eps = static_cast<float>(*eps);
  }
  if (const auto s = r.RequiredFloat(
          General("routed_scaling_factor", {"routed_scaling_factor"}))) {
    if (!(*s > 0) || !std::isfinite(*s)) {
      r.AddError("routed_scaling_factor: must be finite and > 0");
    }
    c.routed_scaling_factor = static_cast<float>(*s);
  }
  if (const auto theta =
          r.RequiredFloat(General("rope_theta", {"rope_theta"}))) {
    if (!(*theta > 0) || !std::isfinite(*theta)) {
      r.AddError("rope_theta: must be finite and > 0");
    }
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
  // Upstream's default when the release omits it: interleaved pairs.
  if (const auto v = r.OptionalBool(
          General("rope_interleave", {"rope_interleave"}), true)) {
    c.rope_interleave = *v;
  }
  // The routing upstream runs: sigmoid scores, bias-corrected group top-k.
  for (const auto& [key, want] :
       {std::pair<const char*, const char*>{"scoring_func", "sigmoid"},
        {"topk_method", "noaux_tc"},
        {"hidden_act", "silu"}}) {
    const auto it = root.find(key);
    if (it == root.end() || *it != want) {
      r.AddError(absl::StrCat(key, ": ",
                              it == root.end() ? "missing" : it->dump(),
                              " is not supported (", want, ")"));
    }
  }
  if (c.n_group > 0 && c.n_routed_experts > 0) {
    if (c.n_routed_experts % c.n_group != 0) {
      r.AddError(absl::StrCat("n_group: ", c.n_group,
                              " does not divide n_routed_experts ",
                              c.n_routed_experts));
    } else if (c.n_routed_experts / c.n_group < 2) {
      r.AddError(absl::StrCat("n_group: ", c.n_group,
                              " leaves groups of one expert (a group scores "
                              "its two best)"));
    } else if (c.topk_group > c.n_group) {
      r.AddError(absl::StrCat("topk_group: ", c.topk_group,
                              " is above n_group ", c.n_group));
    } else if (c.num_experts_per_tok >
               c.topk_group * (c.n_routed_experts / c.n_group)) {
      r.AddError(absl::StrCat("num_experts_per_tok: ", c.num_experts_per_tok,
                              " is more than the ", c.topk_group,
                              " selected groups hold"));
    }
  }
  if (c.first_k_dense_replace > c.num_hidden_layers) {
    r.AddError(absl::StrCat("first_k_dense_replace: ", c.first_k_dense_replace,
                            " is past num_hidden_layers ",
                            c.num_hidden_layers));
  }
  ParseRopeScaling(root, &r, &c);
  ParseQuantization(root, &r, &c);
  c.eos_token_ids = internal::EosTokenIds(root);
  FLOTILLA_RETURN_IF_ERROR(r.Finish(source, "DeepSeek-V3"));
  return c;
}

}  // namespace flotilla::model
