// The chat-specific fields of a completion request (completion_request.h):
// messages with tool calls and tool results, tools, tool_choice,
// response_format and chat_template_kwargs, each checked with a message
// naming the field.
#ifndef FLOTILLA_COORDINATOR_SERVE_CHAT_REQUEST_H_
#define FLOTILLA_COORDINATOR_SERVE_CHAT_REQUEST_H_

#include <string>

#include "absl/status/status.h"
#include "coordinator/serve/completion_request.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator::serve::internal {

// A string field: valid UTF-8 and within the prompt limit.
absl::StatusOr<std::string> Text(const nlohmann::ordered_json& v,
                                 const std::string& field,
                                 const RequestLimits& limits);

absl::Status ParseMessages(const nlohmann::ordered_json& m,
                           const RequestLimits& limits, CompletionRequest* r);
absl::Status ParseTools(const nlohmann::ordered_json& v, CompletionRequest* r);
absl::Status ParseToolChoice(const nlohmann::ordered_json& v,
                             CompletionRequest* r);
absl::Status ParseResponseFormat(const nlohmann::ordered_json& v,
                                 CompletionRequest* r);
absl::Status ParseTemplateKwargs(const nlohmann::ordered_json& v,
                                 CompletionRequest* r);
// After every field: tool_choice against the tools, and the schema the
// output is held to (CompletionRequest::output_schema).
absl::Status ResolveOutputConstraint(CompletionRequest* r);

}  // namespace flotilla::coordinator::serve::internal

#endif  // FLOTILLA_COORDINATOR_SERVE_CHAT_REQUEST_H_
