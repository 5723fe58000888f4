// JSON parsing without exceptions, with error messages that say where the
// text went wrong: "garbage in config.json" is much less useful than
// "config.json: parse error at line 3, column 7".
#ifndef FLOTILLA_SHARED_MODEL_JSON_UTIL_H_
#define FLOTILLA_SHARED_MODEL_JSON_UTIL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace flotilla::model::internal {

// Parses `text`; on failure returns InvalidArgument naming `source` and the
// parser's position and reason. Untrusted text is refused, before a DOM is
// built, when it nests deeper than kMaxJsonDepth (a deep value crashed the
// recursive printing of error messages) or when an object repeats a key
// (the last one silently won).
inline constexpr int kMaxJsonDepth = 64;
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text,
                                         absl::string_view source);

// The same, keeping object keys in the order written (what a chat template
// or a JSON schema's properties depend on).
absl::StatusOr<nlohmann::ordered_json> ParseOrderedJson(
    absl::string_view text, absl::string_view source);

// Short rendering of a JSON value for error messages (long values are cut).
std::string DescribeJson(const nlohmann::json& value);

// Reads a whole (small) file: configs and index files, never shards.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path);

}  // namespace flotilla::model::internal

#endif  // FLOTILLA_SHARED_MODEL_JSON_UTIL_H_
