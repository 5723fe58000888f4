// The body of an OpenAI-style completion request (POST /v1/completions and
// /v1/chat/completions), parsed and checked before anything runs: a bad
// request is a 400 whose message names the field, never a crash or a
// silently ignored parameter.
#ifndef FLOTILLA_COORDINATOR_SERVE_COMPLETION_REQUEST_H_
#define FLOTILLA_COORDINATOR_SERVE_COMPLETION_REQUEST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "coordinator/constrained/json_schema.h"
#include "coordinator/sampler.h"

namespace flotilla::coordinator::serve {

// A call an assistant message made (OpenAI's tool_calls entry).
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as the API carries it
};

struct ChatMessage {
  ChatMessage() = default;
  // A plain text turn (the built-in templates' tests and callers).
  ChatMessage(std::string r, std::string c)
      : role(std::move(r)), content(std::move(c)) {}

  std::string role;     // system, developer, user, assistant, tool
  std::string content;  // the text (parts joined)
  std::vector<ToolCall> tool_calls;  // assistant
  std::string tool_call_id;          // tool: the call it answers
  std::string name;
  std::string reasoning_content;  // assistant: earlier thinking, if sent
  // The message as a chat template sees it: as sent, with each tool call's
  // arguments parsed into an object (as vLLM passes them).
  nlohmann::ordered_json view;
};

struct ToolDefinition {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON schema (null: none given)
};

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };
enum class ResponseFormat { kText, kJsonObject, kJsonSchema };

struct CompletionRequest {
  bool chat = false;
  std::string model;                  // as sent (may be empty)
  std::optional<std::string> prompt;  // text prompt (completions)
  std::vector<int32_t> prompt_ids;    // token-id prompt (completions)
  std::vector<ChatMessage> messages;  // chat
  // Chat: the tools as sent (null: none), each one's name and schema, and
  // which the model must, may or may not call.
  nlohmann::ordered_json tools;
  std::vector<ToolDefinition> tool_definitions;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;  // kNamed
  // parallel_tool_calls: true with tool_choice "required": one or more
  // calls (a JSON array of them, at most kMaxParallelCalls) instead of one.
  bool parallel_tool_calls = false;
  ResponseFormat response_format = ResponseFormat::kText;
  nlohmann::ordered_json response_schema;  // kJsonSchema
  // Retrieved documents for templates that cite them (vLLM's `documents`:
  // a list of objects; null when none).
  nlohmann::ordered_json documents;
  // vLLM's chat_template_kwargs: extra variables for the chat template
  // (enable_thinking, reasoning_effort, ...).
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  // What constrained decoding holds the output to: the response_format's
  // schema, the named tool's parameters, or one call of any tool
  // (tool_choice "required"); null when the output is free.
  std::shared_ptr<const constrained::CompiledSchema> output_schema;
  int max_tokens = 16;
  bool max_tokens_given = false;  // false: the server's default
  SamplerOptions sampler;
  std::vector<std::string> stop;  // stop strings (not part of the output)
  std::vector<int32_t> stop_ids;  // extra stop token ids
  bool ignore_eos = false;        // vLLM's: generate past end of text
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // -1: no log-probabilities; else report them with this many alternatives
  // per token (chat: logprobs true + top_logprobs; completions: logprobs N).
  int top_logprobs = -1;
  // vLLM's extension: logprobs name tokens "token_id:N" instead of text.
  bool tokens_as_ids = false;
};

constexpr int kMaxTopLogprobs = 20;
constexpr int kMaxParallelCalls = 8;

struct RequestLimits {
  int max_tokens = 4096;         // largest max_tokens accepted
  int default_max_tokens = 256;  // when the request gives none
  size_t max_prompt_bytes = 1 << 20;
  int max_prompt_tokens = 4096;
  // The flag that raises max_prompt_tokens, for the refusal's message.
  std::string prompt_limit_flag = "--max-prompt-tokens";
  // Prompt plus max_tokens at most: the positions each sequence's state is
  // charged to the memory budget for (--max-context).
  int max_context = 8192;
  // A request still running after this ends; its sequence leaves the
  // batch at the next step. With timeout_ends_as_length (the default) the
  // reply is what was generated, finish_reason "length"; without, an error
  // (HTTP 504 timeout_error; what the metrics' failed-stream test uses).
  absl::Duration request_timeout = absl::InfiniteDuration();
  bool timeout_ends_as_length = true;
  // What a request that leaves a sampling field out gets (the release's
  // generation_config.json; greedy without one).
  SamplerOptions default_sampler;
};

// Parses a JSON body. InvalidArgument naming the field for malformed JSON,
// wrong types, out-of-range values (max_tokens < 1 or above the limit,
// n != 1, temperature < 0, top_p outside (0, 1], penalties out of range),
// invalid UTF-8, an empty prompt or message list, parameters that are not
// supported (the message says which) and fields it does not know.
absl::StatusOr<CompletionRequest> ParseCompletionRequest(
    absl::string_view body, bool chat, const RequestLimits& limits);
// The same for a body already parsed (Anthropic requests, translated).
absl::StatusOr<CompletionRequest> ParseCompletionRequestJson(
    const nlohmann::ordered_json& body, bool chat, const RequestLimits& limits);

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_COMPLETION_REQUEST_H_
