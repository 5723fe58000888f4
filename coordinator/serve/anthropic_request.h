// Anthropic's Messages API request (POST /v1/messages) translated into the
// chat-completion request the rest of the server runs: system prompt and
// content blocks into messages, tool_use blocks into assistant tool calls,
// tool_result blocks into tool messages, tools' input_schema into function
// parameters, tool_choice auto/any/tool/none into auto/required/named/
// none, stop_sequences into stop. Anything it cannot honour (images,
// documents, server tools, extended thinking budgets) is refused naming
// the field, in Anthropic's terms.
#ifndef FLOTILLA_COORDINATOR_SERVE_ANTHROPIC_REQUEST_H_
#define FLOTILLA_COORDINATOR_SERVE_ANTHROPIC_REQUEST_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator::serve {

// The chat-completion body (OpenAI's shape) for an Anthropic request body;
// InvalidArgument naming the field.
absl::StatusOr<nlohmann::ordered_json> AnthropicToChat(absl::string_view body,
                                                       bool count_only);

// A tool call's id ("call_" + 24 letters and digits) in Anthropic's
// tool-use form ("toolu_" + the same 24).
std::string ToolUseId(const std::string& call_id);

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_ANTHROPIC_REQUEST_H_
