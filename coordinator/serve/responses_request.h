// OpenAI's Responses API request (POST /v1/responses, what Codex speaks)
// translated into the chat-completion request the rest of the server runs.
// `instructions` and developer / system input messages become the system
// prompt (in order); user and assistant messages of input_text /
// output_text parts, function_call and function_call_output items become
// chat messages and tool calls; reasoning items are dropped (this server
// keeps no encrypted reasoning; templates drop past reasoning anyway).
// Function tools are offered; tools that need a service this server does
// not run (web_search, file_search, namespace, local_shell, mcp, ...) are
// not offered, and named in `skipped_tools` for one log line.
// text.format (json_schema, json_object) is response_format, reasoning's
// effort the template's reasoning_effort, max_output_tokens max_tokens.
// The server keeps no responses (`store` is accepted and changes nothing):
// previous_response_id, conversation and background are refused naming
// them, as is anything else that would change the output.
#ifndef FLOTILLA_COORDINATOR_SERVE_RESPONSES_REQUEST_H_
#define FLOTILLA_COORDINATOR_SERVE_RESPONSES_REQUEST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator::serve {

struct ResponsesRequest {
  nlohmann::ordered_json chat;  // the chat-completion body
  // What the response object echoes back.
  nlohmann::ordered_json echo = nlohmann::ordered_json::object();
  std::vector<std::string> skipped_tools;  // by type
};

// InvalidArgument naming the field.
absl::StatusOr<ResponsesRequest> ResponsesToChat(absl::string_view body);

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_RESPONSES_REQUEST_H_
