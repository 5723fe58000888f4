// Schemas come from requests: any JSON must compile or be refused, and the
// matcher must take any bytes after it (a text after the first NUL of the
// input) without crashing, its MinBytesToEnd defined at every step. Also
// Anthropic request bodies, translated and parsed.
#include <cstddef>
#include <cstdint>
#include <string>

#include "coordinator/constrained/json_matcher.h"
#include "coordinator/serve/anthropic_request.h"
#include "coordinator/serve/completion_request.h"
#include "nlohmann/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using flotilla::coordinator::constrained::CompiledSchema;
  using flotilla::coordinator::constrained::JsonMatcher;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string schema_text = input.substr(0, split);
  const std::string text =
      split == std::string::npos ? "" : input.substr(split + 1);
  const nlohmann::ordered_json schema =
      nlohmann::ordered_json::parse(schema_text, nullptr, false);
  if (!schema.is_discarded()) {
    absl::StatusOr<CompiledSchema> s = CompiledSchema::Compile(schema);
    if (s.ok()) {
      JsonMatcher m(&*s);
      for (char c : text) {
        (void)m.MinBytesToEnd();
        if (!m.Feed(c)) break;
      }
      (void)m.CanEnd();
    }
  }
  auto chat = flotilla::coordinator::serve::AnthropicToChat(schema_text, false);
  if (chat.ok()) {
    (void)flotilla::coordinator::serve::ParseCompletionRequestJson(
        *chat, true, flotilla::coordinator::serve::RequestLimits());
  }
  return 0;
}
