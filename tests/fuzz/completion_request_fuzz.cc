// serve's request bodies: /v1/completions and /v1/chat/completions.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "coordinator/serve/completion_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view body(reinterpret_cast<const char*>(data), size);
  const flotilla::coordinator::serve::RequestLimits limits;
  (void)flotilla::coordinator::serve::ParseCompletionRequest(body, false,
                                                             limits);
  (void)flotilla::coordinator::serve::ParseCompletionRequest(body, true,
                                                             limits);
  return 0;
}
