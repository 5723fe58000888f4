#include "shared/model/config_fields.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shared/model/json_util.h"

namespace flotilla::model::internal {
namespace {

using json = nlohmann::json;

const char* ScopePrefix(Scope scope) {
  switch (scope) {
    case Scope::kTextConfig:
      return "text_config.";
    case Scope::kLinearAttn:
      return "text_config.linear_attn_config.";
    case Scope::kRoot:
      return "";
  }
  return "";
}

const char* TypeName(const json& value) {
  // nlohmann's type_name() says "number" for all numbers; distinguishing
  // helps when a float sits where an integer belongs.
  if (value.is_number_float()) return "non-integer number";
  if (value.is_number()) return "integer";
  return value.type_name();
}

}  // namespace

FieldLookup General(const std::string& field,
                    const std::vector<std::string>& keys) {
  FieldLookup lookup{field, {}};
  for (const std::string& key : keys) {
    for (Scope scope : {Scope::kTextConfig, Scope::kLinearAttn, Scope::kRoot}) {
      lookup.candidates.push_back({scope, key});
    }
  }
  return lookup;
}

ConfigFieldReader::ConfigFieldReader(const json& root) : root_(root) {
  const json* tc_parent = &root_;
  if (auto it = root_.find("text_config"); it != root_.end()) {
    if (it->is_object()) {
      text_config_ = &*it;
      tc_parent = text_config_;
    } else {
      AddError(absl::StrCat("text_config: expected an object, got ",
                            it->type_name()));
    }
  }
  // The released layout nests linear_attn_config in text_config; a flat
  // file may carry it at the root, so look where text_config would be.
  if (auto it = tc_parent->find("linear_attn_config"); it != tc_parent->end()) {
    if (it->is_object()) {
      linear_attn_ = &*it;
    } else {
      AddError(absl::StrCat("linear_attn_config: expected an object, got ",
                            it->type_name()));
    }
  }
}

const char* ConfigFieldReader::Prefix(Scope scope) const {
  // Without text_config, linear_attn_config sits at the root.
  if (scope == Scope::kLinearAttn && text_config_ == nullptr) {
    return "linear_attn_config.";
  }
  return ScopePrefix(scope);
}

const json* ConfigFieldReader::ScopeObject(Scope scope) const {
  switch (scope) {
    case Scope::kTextConfig:
      return text_config_;
    case Scope::kLinearAttn:
      return linear_attn_;
    case Scope::kRoot:
      return &root_;
  }
  return nullptr;
}

const json* ConfigFieldReader::Find(const FieldLookup& lookup,
                                    std::string* where) const {
  for (const Candidate& c : lookup.candidates) {
    const json* scope = ScopeObject(c.scope);
    if (scope == nullptr) continue;
    auto it = scope->find(c.key);
    if (it == scope->end()) continue;
    *where = absl::StrCat(Prefix(c.scope), c.key);
    return &*it;
  }
  return nullptr;
}

void ConfigFieldReader::Missing(const FieldLookup& lookup) {
  std::string tried;
  for (const Candidate& c : lookup.candidates) {
    if (ScopeObject(c.scope) == nullptr) continue;
    if (!tried.empty()) tried += ", ";
    absl::StrAppend(&tried, Prefix(c.scope), c.key);
  }
  AddError(absl::StrCat(lookup.field, ": missing (looked for ", tried, ")"));
}

void ConfigFieldReader::WrongType(const std::string& field,
                                  const std::string& where,
                                  absl::string_view expected,
                                  const json& value) {
  AddError(absl::StrCat(field, " (", where, "): expected ", expected, ", got ",
                        TypeName(value), " ", DescribeJson(value)));
}

std::optional<int> ConfigFieldReader::ToInt(const std::string& field,
                                            const std::string& where,
                                            const json& value) {
  constexpr int64_t kMin = std::numeric_limits<int>::min();
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  bool in_range = false;
  int64_t v = 0;
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    in_range = u <= static_cast<uint64_t>(kMax);
    v = in_range ? static_cast<int64_t>(u) : 0;
  } else if (value.is_number_integer()) {
    v = value.get<int64_t>();
    in_range = v >= kMin && v <= kMax;
  } else if (value.is_number_float()) {
    // Accept 4.0 for 4 (some writers emit every number as a float), but not
    // 4.5: truncating would quietly change the model.
    double d = value.get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) {
      WrongType(field, where, "an integer", value);
      return std::nullopt;
    }
    in_range = d >= static_cast<double>(kMin) && d <= static_cast<double>(kMax);
    v = in_range ? static_cast<int64_t>(d) : 0;
  } else {
    WrongType(field, where, "an integer", value);
    return std::nullopt;
  }
  if (!in_range) {
    AddError(absl::StrCat(field, " (", where, "): ", DescribeJson(value),
                          " does not fit in a 32-bit int"));
    return std::nullopt;
  }
  return static_cast<int>(v);
}

std::optional<int> ConfigFieldReader::RequiredInt(const FieldLookup& lookup) {
  std::string where;
  const json* value = Find(lookup, &where);
  if (value == nullptr) {
    Missing(lookup);
    return std::nullopt;
  }
  return ToInt(lookup.field, where, *value);
}

std::optional<int> ConfigFieldReader::OptionalInt(const FieldLookup& lookup,
                                                  bool* present) {
  std::string where;
  const json* value = Find(lookup, &where);
  *present = value != nullptr;
  if (value == nullptr) return std::nullopt;
  return ToInt(lookup.field, where, *value);
}

std::optional<double> ConfigFieldReader::RequiredFloat(
    const FieldLookup& lookup) {
  std::string where;
  const json* value = Find(lookup, &where);
  if (value == nullptr) {
    Missing(lookup);
    return std::nullopt;
  }
  if (!value->is_number()) {
    WrongType(lookup.field, where, "a number", *value);
    return std::nullopt;
  }
  double d = value->get<double>();
  if (!std::isfinite(d)) {
    AddError(absl::StrCat(lookup.field, " (", where, "): not finite"));
    return std::nullopt;
  }
  return d;
}

std::optional<bool> ConfigFieldReader::OptionalBoolNoDefault(
    const FieldLookup& lookup) {
  std::string where;
  const json* value = Find(lookup, &where);
  if (value == nullptr) return std::nullopt;
  if (!value->is_boolean()) {
    WrongType(lookup.field, where, "true or false", *value);
    return std::nullopt;
  }
  return value->get<bool>();
}

std::optional<bool> ConfigFieldReader::OptionalBool(const FieldLookup& lookup,
                                                    bool default_value) {
  std::string where;
  if (Find(lookup, &where) == nullptr) return default_value;
  return OptionalBoolNoDefault(lookup);
}

std::optional<std::vector<int>> ConfigFieldReader::RequiredIntList(
    const FieldLookup& lookup) {
  std::string where;
  const json* value = Find(lookup, &where);
  if (value == nullptr) {
    Missing(lookup);
    return std::nullopt;
  }
  if (!value->is_array()) {
    WrongType(lookup.field, where, "an array of integers", *value);
    return std::nullopt;
  }
  std::vector<int> out;
  bool ok = true;
  for (size_t i = 0; i < value->size(); ++i) {
    std::optional<int> v =
        ToInt(lookup.field, absl::StrCat(where, "[", i, "]"), (*value)[i]);
    if (v.has_value()) {
      out.push_back(*v);
    } else {
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

void ConfigFieldReader::BoundedInt(const char* name, int* out, int minimum,
                                   int maximum) {
  const std::optional<int> v = RequiredInt(General(name, {name}));
  if (!v.has_value()) return;
  if (*v < minimum || *v > maximum) {
    AddError(
        absl::StrCat(name, ": ", *v, " must be in ", minimum, "..", maximum));
  }
  *out = *v;
}

void ConfigFieldReader::CheckGqaMoe(int heads, int kv_heads, int head_dim,
                                    int top_k, int experts,
                                    const char* experts_field) {
  if (heads > 0 && kv_heads > 0 && heads % kv_heads != 0) {
    AddError(absl::StrCat("num_key_value_heads: ", kv_heads,
                          " does not divide num_attention_heads ", heads));
  }
  if (head_dim % 2 != 0) {
    AddError(
        absl::StrCat("head_dim: ", head_dim, " must be even (rotary pairs)"));
  }
  if (top_k > experts) {
    AddError(absl::StrCat("num_experts_per_tok: ", top_k, " is more than ",
                          experts_field, " ", experts));
  }
}

absl::Status ConfigFieldReader::Finish(absl::string_view source,
                                       absl::string_view what) const {
  if (errors_.empty()) return absl::OkStatus();
  const size_t n = errors_.size();
  return absl::InvalidArgumentError(absl::StrCat(
      source, ": invalid ", what, " config (", n,
      n == 1 ? " problem" : " problems", "): ", absl::StrJoin(errors_, "; ")));
}

std::vector<int32_t> EosTokenIds(const nlohmann::json& root) {
  std::vector<int32_t> ids;
  const auto it = root.find("eos_token_id");
  if (it == root.end()) return ids;
  const nlohmann::json list =
      it->is_array() ? *it : nlohmann::json::array({*it});
  for (const nlohmann::json& id : list) {
    if (id.is_number_integer()) ids.push_back(id.get<int32_t>());
  }
  return ids;
}

}  // namespace flotilla::model::internal
