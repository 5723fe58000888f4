#include "shared/family/mixtral/mixtral_config.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shared/model/config_fields.h"

namespace flotilla::model {

using internal::ConfigFieldReader;
using internal::General;

absl::StatusOr<MixtralConfig> ParseMixtralConfig(const nlohmann::json& root,
                                                 absl::string_view source) {
  ConfigFieldReader r(root);
  auto i = [&](const char* name) {
    return r.RequiredInt(General(name, {name}));
  };
  auto positive = [&](const char* name, const std::optional<int>& v) {
    if (v.has_value() && *v < 1) {
      r.AddError(absl::StrCat(name, ": ", *v, " must be >= 1"));
    }
  };
  MixtralConfig c;
  const auto hidden = i("hidden_size");
  const auto inter = i("intermediate_size");
  const auto layers = i("num_hidden_layers");
  const auto heads = i("num_attention_heads");
  const auto vocab = i("vocab_size");
  const auto positions = i("max_position_embeddings");
  const auto experts = i("num_local_experts");
  const auto topk = i("num_experts_per_tok");
  const auto eps = r.RequiredFloat(General("rms_norm_eps", {"rms_norm_eps"}));
  bool has_kv = false, has_head_dim = false;
  const auto kv = r.OptionalInt(
      General("num_key_value_heads", {"num_key_value_heads"}), &has_kv);
  const auto head_dim =
      r.OptionalInt(General("head_dim", {"head_dim"}), &has_head_dim);
  positive("hidden_size", hidden);
  positive("intermediate_size", inter);
  positive("num_hidden_layers", layers);
  positive("num_attention_heads", heads);
  positive("vocab_size", vocab);
  positive("max_position_embeddings", positions);
  positive("num_local_experts", experts);
  positive("num_experts_per_tok", topk);
  if (has_kv) positive("num_key_value_heads", kv);
  if (has_head_dim && head_dim.has_value() && *head_dim < 2) {
    r.AddError(absl::StrCat("head_dim: ", *head_dim, " must be >= 2"));
  }
  if (eps.has_value() && (!(*eps > 0) || !(*eps < 1))) {
    r.AddError(absl::StrCat("rms_norm_eps: ", *eps, " must be in (0, 1)"));
  }
  // Quantized releases store other tensors than this engine reads.
  if (const auto q = root.find("quantization_config");
      q != root.end() && !q->is_null()) {
    r.AddError(absl::StrCat("quantization_config: ", q->dump(),
                            " is not supported (Mixtral runs the float "
                            "release)"));
  }
  c.num_key_value_heads = has_kv && kv.has_value() ? *kv : heads.value_or(0);
  if (heads.has_value() && *heads > 0) {
    if (!has_head_dim && hidden.has_value() && *hidden % *heads != 0) {
      r.AddError(absl::StrCat("num_attention_heads: ", *heads,
                              " does not divide hidden_size ", *hidden));
    }
    if (c.num_key_value_heads > 0 && *heads % c.num_key_value_heads != 0) {
      r.AddError(absl::StrCat("num_key_value_heads: ", c.num_key_value_heads,
                              " does not divide num_attention_heads ", *heads));
    }
  }
  if (topk.has_value() && experts.has_value() && *topk > *experts) {
    r.AddError(absl::StrCat("num_experts_per_tok: ", *topk,
                            " is more than num_local_experts ", *experts));
  }
  c.head_dim = has_head_dim && head_dim.has_value()
                   ? *head_dim
                   : (heads.value_or(0) > 0 ? hidden.value_or(0) / *heads : 0);
  if (c.head_dim % 2 != 0) {
    r.AddError(
        absl::StrCat("head_dim: ", c.head_dim, " must be even (rotary pairs)"));
  }
  if (const auto it = root.find("rope_theta"); it != root.end()) {
    if (!it->is_number() || !(it->get<double>() > 0)) {
      r.AddError("rope_theta: must be a number > 0");
    } else {
      c.rope_theta = it->get<double>();
    }
  }
  if (const auto it = root.find("hidden_act");
      it != root.end() && *it != "silu") {
    r.AddError(
        absl::StrCat("hidden_act: '", it->dump(), "' is not supported (silu)"));
  }
  if (const auto it = root.find("rope_scaling");
      it != root.end() && !it->is_null()) {
    r.AddError("rope_scaling: scaled RoPE is not supported");
  }
  if (const auto it = root.find("tie_word_embeddings"); it != root.end()) {
    if (!it->is_boolean()) {
      r.AddError("tie_word_embeddings: must be true or false");
    } else {
      c.tie_word_embeddings = it->get<bool>();
    }
  }
  if (const auto it = root.find("sliding_window");
      it != root.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 ||
        it->get<int64_t>() > INT32_MAX) {
      r.AddError("sliding_window: must be null or a positive integer");
    } else {
      c.sliding_window = it->get<int>();
    }
  }
  if (const auto it = root.find("eos_token_id"); it != root.end()) {
    if (it->is_number_integer()) {
      c.eos_token_ids.push_back(it->get<int32_t>());
    } else if (it->is_array()) {
      for (const auto& id : *it) {
        if (id.is_number_integer())
          c.eos_token_ids.push_back(id.get<int32_t>());
      }
    }
  }
  if (!r.errors().empty()) {
    const size_t n = r.errors().size();
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": invalid Mixtral config (", n,
                     n == 1 ? " problem" : " problems",
                     "): ", absl::StrJoin(r.errors(), "; ")));
  }
  c.hidden_size = *hidden;
  c.intermediate_size = *inter;
  c.num_hidden_layers = *layers;
  c.num_attention_heads = *heads;
  c.vocab_size = *vocab;
  c.max_position_embeddings = *positions;
  c.num_local_experts = *experts;
  c.num_experts_per_tok = *topk;
  c.rms_norm_eps = static_cast<float>(*eps);
  return c;
}

}  // namespace flotilla::model
