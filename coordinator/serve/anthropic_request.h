// Anthropic's Messages API request (POST /v1/messages) translated into the
// chat-completion request the rest of the server runs: system prompt and
// content blocks into messages, tool_use blocks into assistant tool calls,
// tool_result blocks into tool messages, tools' input_schema into function
// parameters, tool_choice auto/any/tool/none into auto/required/named/
// none, stop_sequences into stop. As Claude Code sends it: system entries
// inside `messages` join the system prompt in order; `thinking`
// (enabled / adaptive / disabled) becomes the template's enable_thinking;
// output_config's effort its reasoning_effort and its json_schema format a
// response_format; context_management, metadata and cache_control are
// bookkeeping; server tools (web search, ...) are not offered to the
// model. Anything it cannot honour (images, documents, other
// output_config keys) is refused naming the field, in Anthropic's terms.
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
