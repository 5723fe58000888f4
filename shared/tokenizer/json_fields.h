// Typed optional fields of tokenizer.json objects that never throw:
// nlohmann's value() throws on a mistyped field, which would take the
// process down on a bad file instead of naming the field.
#ifndef FLOTILLA_SHARED_TOKENIZER_JSON_FIELDS_H_
#define FLOTILLA_SHARED_TOKENIZER_JSON_FIELDS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace flotilla::tokenizer::internal {

// `fallback` when `key` is absent or null; InvalidArgument naming
// where.key when it holds another type (or, for ints, lies outside
// [lo, hi]).
inline absl::StatusOr<bool> OptionalBool(const nlohmann::json& j,
                                         const char* key, bool fallback,
                                         const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".", key, " must be true or false"));
  }
  return it->get<bool>();
}

inline absl::StatusOr<std::string> OptionalString(const nlohmann::json& j,
                                                  const char* key,
                                                  const std::string& fallback,
                                                  const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".", key, " must be a string"));
  }
  return it->get<std::string>();
}

// An integer JSON value in [lo, hi], or an error naming `where`.
inline absl::StatusOr<int64_t> IntIn(const nlohmann::json& v, int64_t lo,
                                     int64_t hi, const std::string& where) {
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() &&
       v.get<uint64_t>() > static_cast<uint64_t>(hi)) ||
      v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " must be an integer in ", lo, "..", hi));
  }
  return v.get<int64_t>();
}

inline absl::StatusOr<int64_t> OptionalInt(const nlohmann::json& j,
                                           const char* key, int64_t fallback,
                                           int64_t lo, int64_t hi,
                                           const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return IntIn(*it, lo, hi, absl::StrCat(where, ".", key));
}

}  // namespace flotilla::tokenizer::internal

#endif  // FLOTILLA_SHARED_TOKENIZER_JSON_FIELDS_H_
