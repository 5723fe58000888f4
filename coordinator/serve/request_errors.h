// The error of a request the client got wrong, and a field reader, shared
// by the request parsers (one definition, so that the library also builds
// as unity units).
#ifndef FLOTILLA_COORDINATOR_SERVE_REQUEST_ERRORS_H_
#define FLOTILLA_COORDINATOR_SERVE_REQUEST_ERRORS_H_

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator::serve::internal {

// InvalidArgument with `message` (it names the field): answered 400.
inline absl::Status Bad(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

// obj[key] when it is a string, else "" (never throws on odd types).
inline std::string StringField(const nlohmann::ordered_json& obj,
                               const char* key) {
  if (!obj.is_object()) return "";
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace flotilla::coordinator::serve::internal

#endif  // FLOTILLA_COORDINATOR_SERVE_REQUEST_ERRORS_H_
