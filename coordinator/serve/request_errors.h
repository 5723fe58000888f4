// The error of a request the client got wrong, shared by the request
// parsers (one definition, so that the library also builds as unity units).
#ifndef FLOTILLA_COORDINATOR_SERVE_REQUEST_ERRORS_H_
#define FLOTILLA_COORDINATOR_SERVE_REQUEST_ERRORS_H_

#include <string>

#include "absl/status/status.h"

namespace flotilla::coordinator::serve::internal {

// InvalidArgument with `message` (it names the field): answered 400.
inline absl::Status Bad(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

}  // namespace flotilla::coordinator::serve::internal

#endif  // FLOTILLA_COORDINATOR_SERVE_REQUEST_ERRORS_H_
