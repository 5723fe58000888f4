#include "shared/family/kimi_k3/kimi_k3_config.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "shared/base/status_macros.h"
#include "shared/model/config_fields.h"
#include "shared/model/json_util.h"

namespace flotilla::model {
namespace {

using internal::Candidate;
using internal::ConfigFieldReader;
using internal::FieldLookup;
using internal::General;
using internal::Scope;
using json = nlohmann::json;

// The engine keeps per-token expert choices in fixed arrays of this size.
constexpr int kMaxTopK = 64;
// MXFP4 (OCP MX) group size; the only one the expert kernels implement.
constexpr int kMxfp4GroupSize = 32;

// KDA keys live in linear_attn_config in the released file; look there
// first so that a same-named key elsewhere cannot shadow them.
FieldLookup Kda(const std::string& field,
                const std::vector<std::string>& keys) {
  FieldLookup lookup{field, {}};
  for (const std::string& key : keys) {
    for (Scope s : {Scope::kLinearAttn, Scope::kTextConfig, Scope::kRoot}) {
      lookup.candidates.push_back({s, key});
    }
  }
  return lookup;
}

// lac.num_heads / lac.head_dim, then the flat alias anywhere. The bare names
// are taken only from linear_attn_config: text_config.head_dim or a root
// num_heads would describe some other attention.
FieldLookup KdaShape(const std::string& field, const std::string& lac_key) {
  FieldLookup lookup = General(field, {field});
  lookup.candidates.insert(lookup.candidates.begin(),
                           Candidate{Scope::kLinearAttn, lac_key});
  return lookup;
}

void Assign(const std::optional<int>& v, int* out) {
  if (v.has_value()) *out = *v;
}
void Assign(const std::optional<double>& v, float* out) {
  if (v.has_value()) *out = static_cast<float>(*v);
}
void Assign(const std::optional<bool>& v, bool* out) {
  if (v.has_value()) *out = *v;
}

// Range checks run only on fields that were read successfully, so one bad
// field produces one message, not a cascade.
class RangeChecker {
 public:
  explicit RangeChecker(ConfigFieldReader* reader) : reader_(reader) {}

  void AtLeast(const char* field, const std::optional<int>& v, int min) {
    if (v.has_value() && *v < min) {
      reader_->AddError(absl::StrCat(field, ": ", *v, " must be >= ", min));
    }
  }
  void InRange(const char* field, const std::optional<int>& v, int lo, int hi) {
    if (v.has_value() && (*v < lo || *v > hi)) {
      reader_->AddError(
          absl::StrCat(field, ": ", *v, " is outside ", lo, "..", hi));
    }
  }

 private:
  ConfigFieldReader* reader_;
};

void CheckLayerList(ConfigFieldReader& r, const std::vector<int>& mla,
                    const std::optional<int>& layers) {
  if (mla.empty()) {
    // An empty list would make every layer KDA without complaint.
    r.AddError("full_attn_layers: empty (at least one MLA layer expected)");
    return;
  }
  if (!layers.has_value() || *layers <= 0) return;
  std::set<int> seen;
  std::vector<std::string> bad;
  for (int l : mla) {
    if (l < 1 || l > *layers) {
      bad.push_back(absl::StrCat(l));
    } else if (!seen.insert(l).second) {
      r.AddError(absl::StrCat("full_attn_layers: layer ", l, " listed twice"));
    }
  }
  if (!bad.empty()) {
    r.AddError(absl::StrCat("full_attn_layers: entries ",
                            absl::StrJoin(bad, ", "), " are outside 1..",
                            *layers, " (the list is one-based)"));
  } else if (static_cast<int>(seen.size()) == *layers) {
    r.AddError("full_attn_layers: every layer is MLA (no KDA layer left)");
  }
  // kda_layers is not read, but a file whose two lists disagree does not
  // say which layers are which.
  std::string where;
  const json* kda = r.Find(Kda("kda_layers", {"kda_layers"}), &where);
  if (kda == nullptr || !bad.empty()) return;
  std::set<int> expected;
  for (int l = 1; l <= *layers; ++l) {
    if (!seen.count(l)) expected.insert(l);
  }
  std::set<int> listed;
  bool numeric = kda->is_array();
  if (numeric) {
    for (const json& v : *kda) {
      if (!v.is_number_integer()) {
        numeric = false;
        break;
      }
      listed.insert(static_cast<int>(v.get<int64_t>()));
    }
  }
  if (!numeric || listed != expected || listed.size() != kda->size()) {
    r.AddError(absl::StrCat("kda_layers (", where,
                            "): not the complement of full_attn_layers"));
  }
}

// Keys the engine does not use but whose other values would mean a model it
// cannot run.
void CheckUnsupported(ConfigFieldReader& r) {
  bool present = false;
  std::optional<int> groups = r.OptionalInt(
      General("num_expert_group", {"num_expert_group"}), &present);
  if (groups.has_value() && *groups != 1) {
    r.AddError(absl::StrCat("num_expert_group: ", *groups,
                            " is not supported (only 1)"));
  }
  std::optional<bool> tied = r.OptionalBoolNoDefault(
      General("tie_word_embeddings", {"tie_word_embeddings"}));
  if (tied.value_or(false)) {
    r.AddError("tie_word_embeddings: true is not supported (K3 is untied)");
  }
  // Where the release puts quantization_config is not recorded: check the
  // root and text_config, the plain group_size and compressed-tensors'
  // config_groups.*.weights.group_size.
  for (Scope scope : {Scope::kRoot, Scope::kTextConfig}) {
    const json* obj = r.ScopeObject(scope);
    if (obj == nullptr) continue;
    auto q = obj->find("quantization_config");
    if (q == obj->end() || !q->is_object()) continue;
    std::string prefix = absl::StrCat(
        scope == Scope::kRoot ? "" : "text_config.", "quantization_config");
    std::vector<std::pair<std::string, const json*>> sizes;
    if (auto g = q->find("group_size"); g != q->end()) {
      sizes.push_back({prefix + ".group_size", &*g});
    }
    if (auto cg = q->find("config_groups"); cg != q->end() && cg->is_object()) {
      for (auto it = cg->begin(); it != cg->end(); ++it) {
        if (!it->is_object()) continue;
        auto w = it->find("weights");
        if (w == it->end() || !w->is_object()) continue;
        if (auto g = w->find("group_size"); g != w->end()) {
          sizes.push_back({absl::StrCat(prefix, ".config_groups.", it.key(),
                                        ".weights.group_size"),
                           &*g});
        }
      }
    }
    for (const auto& [where, g] : sizes) {
      if (g->is_null()) continue;  // "not grouped" in some writers; no claim
      if (!g->is_number_integer() || g->get<int64_t>() != kMxfp4GroupSize) {
        r.AddError(absl::StrCat("quantization group_size (", where,
                                "): ", internal::DescribeJson(*g), " is not ",
                                kMxfp4GroupSize));
      }
    }
  }
}

}  // namespace

bool K3Config::IsMlaLayer(int layer) const {
  return std::find(full_attn_layers.begin(), full_attn_layers.end(),
                   layer + 1) != full_attn_layers.end();
}

absl::StatusOr<K3Config> ParseK3Config(absl::string_view json_text,
                                       absl::string_view source) {
  FLOTILLA_ASSIGN_OR_RETURN(json root, internal::ParseJson(json_text, source));
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": invalid K3 config: top level is ",
                     root.type_name(), ", not an object"));
  }
  ConfigFieldReader r(root);
  RangeChecker check(&r);
  K3Config c;
  auto i = [&](const char* name) {
    return r.RequiredInt(General(name, {name}));
  };
  auto f = [&](const char* name) {
    return r.RequiredFloat(General(name, {name}));
  };

  auto hidden = i("hidden_size");
  auto layers = i("num_hidden_layers");
  auto vocab = i("vocab_size");
  auto eps = f("rms_norm_eps");
  auto kda_heads = r.RequiredInt(KdaShape("kda_num_heads", "num_heads"));
  auto kda_dim = r.RequiredInt(KdaShape("kda_head_dim", "head_dim"));
  auto conv =
      r.RequiredInt(Kda("short_conv_kernel_size", {"short_conv_kernel_size"}));
  auto gmin = r.RequiredFloat(Kda("gate_lower_bound", {"gate_lower_bound"}));
  auto mla_layers =
      r.RequiredIntList(Kda("full_attn_layers", {"full_attn_layers"}));
  auto mla_heads = i("num_attention_heads");
  auto q_lora = i("q_lora_rank");
  auto kv_lora = i("kv_lora_rank");
  auto nope = i("qk_nope_head_dim");
  auto rope = i("qk_rope_head_dim");
  auto v_dim = i("v_head_dim");
  auto out_gate = r.OptionalBool(
      General("mla_use_output_gate", {"mla_use_output_gate"}), true);
  auto experts = i("num_experts");
  auto topk = i("num_experts_per_token");
  auto shared = i("num_shared_experts");
  auto latent = i("routed_expert_hidden_size");
  auto moe_inter = i("moe_intermediate_size");
  auto scaling = f("routed_scaling_factor");
  auto renorm =
      r.OptionalBool(General("moe_renormalize", {"moe_renormalize"}), true);
  auto latent_norm = r.OptionalBool(
      General("latent_moe_use_norm", {"latent_moe_use_norm"}), true);
  auto dense_k = i("first_k_dense_replace");
  auto inter = i("intermediate_size");
  auto block = i("attn_res_block_size");
  auto beta1 = r.RequiredFloat(
      General("situ_beta", {"activation_situ_beta", "situ_beta"}));
  auto beta2 = r.RequiredFloat(General(
      "situ_linear_beta", {"activation_situ_linear_beta", "situ_linear_beta"}));

  check.AtLeast("hidden_size", hidden, 1);
  check.AtLeast("num_hidden_layers", layers, 1);
  check.AtLeast("vocab_size", vocab, 1);
  // Float fields in the ranges real checkpoints use, with room: a value
  // outside them is a corrupt or mistyped file, not a model to run (an eps
  // of 9.2e18 only flattens every activation to zero).
  auto float_in = [&](const char* name, const std::optional<double>& v,
                      double low, double high, bool low_open) {
    if (v.has_value() && (*v > high || *v < low || (low_open && *v == low))) {
      r.AddError(absl::StrCat(name, ": ", *v, " is outside ",
                              low_open ? "(" : "[", low, ", ", high, "]"));
    }
  };
  float_in("rms_norm_eps", eps, 0, 0.1, true);
  float_in("routed_scaling_factor", scaling, 0, 1000, true);
  float_in("gate_lower_bound", gmin, -1000, 0, false);
  float_in("situ_beta", beta1, 0, 1e6, true);
  float_in("situ_linear_beta", beta2, 0, 1e6, true);
  // The engine computes KDA's forget gate at full rank (f_a_proj, f_b_proj);
  // a config that says otherwise describes another model.
  if (std::optional<bool> full_rank = r.OptionalBoolNoDefault(
          Kda("use_full_rank_gate", {"use_full_rank_gate"}));
      full_rank.has_value() && !*full_rank) {
    r.AddError(
        "use_full_rank_gate: false is not supported (this engine runs the "
        "full-rank KDA gate)");
  }
  check.AtLeast("kda_num_heads", kda_heads, 1);
  check.AtLeast("kda_head_dim", kda_dim, 1);
  check.AtLeast("short_conv_kernel_size", conv, 1);
  check.AtLeast("num_attention_heads", mla_heads, 1);
  check.AtLeast("q_lora_rank", q_lora, 1);
  check.AtLeast("kv_lora_rank", kv_lora, 1);
  check.AtLeast("qk_nope_head_dim", nope, 1);
  check.AtLeast("qk_rope_head_dim", rope, 1);
  check.AtLeast("v_head_dim", v_dim, 1);
  check.AtLeast("num_experts", experts, 1);
  check.AtLeast("num_shared_experts", shared, 0);
  check.AtLeast("routed_expert_hidden_size", latent, 1);
  check.AtLeast("moe_intermediate_size", moe_inter, 1);
  check.AtLeast("attn_res_block_size", block, 1);
  check.AtLeast("num_experts_per_token", topk, 1);
  if (topk.has_value() && *topk > kMaxTopK) {
    r.AddError(absl::StrCat("num_experts_per_token: ", *topk,
                            " exceeds the engine maximum of ", kMaxTopK));
  }
  if (topk.has_value() && experts.has_value() && *experts >= 1 &&
      *topk > *experts) {
    r.AddError(absl::StrCat("num_experts_per_token: ", *topk,
                            " exceeds num_experts (", *experts, ")"));
  }
  if (layers.has_value() && *layers >= 1) {
    check.InRange("first_k_dense_replace", dense_k, 0, *layers);
  } else {
    check.AtLeast("first_k_dense_replace", dense_k, 0);
  }
  // A dense FFN needs a width only when some layer uses one.
  check.AtLeast("intermediate_size", inter,
                dense_k.has_value() && *dense_k > 0 ? 1 : 0);
  if (mla_layers.has_value()) CheckLayerList(r, *mla_layers, layers);
  CheckUnsupported(r);

  if (!r.errors().empty()) {
    const size_t n = r.errors().size();
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": invalid K3 config (", n, n == 1 ? " problem" : " problems",
        "): ", absl::StrJoin(r.errors(), "; ")));
  }
  Assign(hidden, &c.hidden_size);
  Assign(layers, &c.num_hidden_layers);
  Assign(vocab, &c.vocab_size);
  Assign(eps, &c.rms_norm_eps);
  Assign(kda_heads, &c.kda_num_heads);
  Assign(kda_dim, &c.kda_head_dim);
  Assign(conv, &c.short_conv_kernel_size);
  Assign(gmin, &c.gate_lower_bound);
  Assign(mla_heads, &c.num_attention_heads);
  Assign(q_lora, &c.q_lora_rank);
  Assign(kv_lora, &c.kv_lora_rank);
  Assign(nope, &c.qk_nope_head_dim);
  Assign(rope, &c.qk_rope_head_dim);
  Assign(v_dim, &c.v_head_dim);
  Assign(out_gate, &c.mla_use_output_gate);
  Assign(experts, &c.num_experts);
  Assign(topk, &c.num_experts_per_token);
  Assign(shared, &c.num_shared_experts);
  Assign(latent, &c.routed_expert_hidden_size);
  Assign(moe_inter, &c.moe_intermediate_size);
  Assign(scaling, &c.routed_scaling_factor);
  Assign(renorm, &c.moe_renormalize);
  Assign(latent_norm, &c.latent_moe_use_norm);
  Assign(dense_k, &c.first_k_dense_replace);
  Assign(inter, &c.intermediate_size);
  Assign(block, &c.attn_res_block_size);
  Assign(beta1, &c.situ_beta);
  Assign(beta2, &c.situ_linear_beta);
  c.full_attn_layers = std::move(*mla_layers);
  return c;
}

absl::StatusOr<K3Config> LoadK3Config(const std::string& path) {
  FLOTILLA_ASSIGN_OR_RETURN(std::string text, internal::ReadSmallFile(path));
  return ParseK3Config(text, path);
}

}  // namespace flotilla::model
