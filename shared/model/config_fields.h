// Typed field lookup over a K3 config.json, in either the flat or the nested
// (text_config / linear_attn_config) form. Every getter records problems
// instead of returning early, so the caller can report all bad fields of a
// config in one message: a user fixing a hand-edited config should not have
// to iterate once per mistake.
#ifndef FLOTILLA_SHARED_MODEL_CONFIG_FIELDS_H_
#define FLOTILLA_SHARED_MODEL_CONFIG_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace flotilla::model::internal {

// Where a key may live. kRoot is the top-level object; in the flat form it
// is the only scope that exists.
enum class Scope { kTextConfig, kLinearAttn, kRoot };

struct Candidate {
  Scope scope;
  std::string key;
};

// One K3Config field: the name used in messages and the places to look, in
// order. The first candidate present wins, even when it has the wrong type:
// silently falling back to an alias would hide a broken released key.
struct FieldLookup {
  std::string field;
  std::vector<Candidate> candidates;
};

// The usual order: for each key name (released name first, then flat
// aliases), text_config, then linear_attn_config, then the root.
FieldLookup General(const std::string& field,
                    const std::vector<std::string>& keys);

class ConfigFieldReader {
 public:
  // `root` must outlive the reader. Records an error when text_config or
  // linear_attn_config exist but are not objects.
  explicit ConfigFieldReader(const nlohmann::json& root);

  // Each getter returns nullopt after recording a problem (missing, wrong
  // type, not an integer, outside int range).
  std::optional<int> RequiredInt(const FieldLookup& lookup);
  std::optional<double> RequiredFloat(const FieldLookup& lookup);
  std::optional<bool> OptionalBool(const FieldLookup& lookup,
                                   bool default_value);
  std::optional<std::vector<int>> RequiredIntList(const FieldLookup& lookup);
  // Integer that may be absent (nullopt, no error); a present but mistyped
  // value records an error and also yields nullopt.
  std::optional<int> OptionalInt(const FieldLookup& lookup, bool* present);
  std::optional<bool> OptionalBoolNoDefault(const FieldLookup& lookup);

  // Finds the first present candidate; `where` gets a dotted path for
  // messages. Null when absent.
  const nlohmann::json* Find(const FieldLookup& lookup,
                             std::string* where) const;
  // The object for a scope, or null when that scope does not exist.
  const nlohmann::json* ScopeObject(Scope scope) const;

  // A top-level integer `name` into *out, recording "name: v must be in
  // minimum..maximum" when outside (families bound their sizes so the
  // planner's byte counts stay within 64 bits).
  void BoundedInt(const char* name, int* out, int minimum, int maximum);
  // Grouped-query attention's shape: kv heads dividing the heads, an even
  // head_dim (RoPE rotates pairs), and top-k within `experts_field`'s
  // expert count; each problem recorded under its field's name.
  void CheckGqaMoe(int heads, int kv_heads, int head_dim, int top_k,
                   int experts, const char* experts_field);
  // OK without errors, else one InvalidArgument: "<source>: invalid <what>
  // config (N problems): <each>".
  absl::Status Finish(absl::string_view source, absl::string_view what) const;

  void AddError(std::string message) { errors_.push_back(std::move(message)); }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  const char* Prefix(Scope scope) const;
  void Missing(const FieldLookup& lookup);
  void WrongType(const std::string& field, const std::string& where,
                 absl::string_view expected, const nlohmann::json& value);
  std::optional<int> ToInt(const std::string& field, const std::string& where,
                           const nlohmann::json& value);

  const nlohmann::json& root_;
  const nlohmann::json* text_config_ = nullptr;
  const nlohmann::json* linear_attn_ = nullptr;
  std::vector<std::string> errors_;
};

// config.json's eos_token_id, one id or a list (non-integers skipped).
std::vector<int32_t> EosTokenIds(const nlohmann::json& root);

}  // namespace flotilla::model::internal

#endif  // FLOTILLA_SHARED_MODEL_CONFIG_FIELDS_H_
