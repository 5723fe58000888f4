// A parsed completion request made into a running Completion: the model
// named, the chat rendered and tokenized, the limits checked, constrained
// decoding set up, the job queued. Shared by the OpenAI routes and the
// Anthropic Messages route, which answer its refusals in their own shapes.
#include <atomic>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "coordinator/serve/http_internal.h"
#include "coordinator/serve/http_server.h"

namespace flotilla::coordinator::serve {

absl::StatusOr<std::shared_ptr<Completion>> HttpServer::StartCompletion(
    const CompletionRequest& req, bool chat, ChatOutputOptions* output,
    int* refusal) {
  auto refuse = [refusal](int status, std::string message) {
    *refusal = status;
    return absl::InvalidArgumentError(std::move(message));
  };
  if (options_.strict_model_name && !req.model.empty() &&
      req.model != options_.model_name) {
    return refuse(404, absl::StrCat("model '", req.model,
                                    "' is not served here (this server "
                                    "serves '",
                                    options_.model_name, "')"));
  }
  output->syntax = chat_format().tool_syntax();
  if (output->syntax == ToolSyntax::kHarmony && chat) {
    output->harmony = tokenizer_;
  }
  output->think_tags = chat_format().think_tags();
  output->parse_tools =
      !req.tool_definitions.empty() && req.tool_choice == ToolChoice::kAuto;
  output->forced = req.tool_choice;
  output->constrained = req.response_format != ResponseFormat::kText;
  output->forced_name = req.tool_choice_name;
  std::vector<int32_t> prompt = req.prompt_ids;
  if (prompt.empty()) {
    if (tokenizer_ == nullptr) {
      return refuse(
          400, "this model has no tokenizer: send the prompt as token ids");
    }
    std::string text = chat ? std::string() : *req.prompt;
    if (chat) {
      absl::StatusOr<std::string> rendered =
          chat_format().Render(req, options_.limits.max_prompt_bytes);
      if (!rendered.ok()) {
        return refuse(400, std::string(rendered.status().message()));
      }
      text = *std::move(rendered);
      // A template that opens <think> for the model: the reply starts in it.
      const absl::string_view tail = absl::StripTrailingAsciiWhitespace(text);
      output->starts_in_reasoning = absl::EndsWith(tail, "<think>");
      // Kimi K3's generation prompt opens its think or response channel.
      if (absl::EndsWith(tail, "<|open|>think<|sep|>")) {
        output->xtml_channel = "think";
      } else if (absl::EndsWith(tail, "<|open|>response<|sep|>")) {
        output->xtml_channel = "response";
      }
    }
    prompt = tokenizer_->Encode(text);
  }
  CompletionSpec spec;
  spec.prompt = std::move(prompt);
  spec.max_tokens = req.max_tokens;
  spec.max_tokens_given = req.max_tokens_given;
  spec.sampler = req.sampler;
  FitDefaultMaxTokens(&spec, options_.limits);
  if (absl::Status st =
          CheckCompletionSpec(spec, model_->vocab_size(), options_.limits);
      !st.ok()) {
    return refuse(400, std::string(st.message()));
  }
  spec.stop = req.stop;
  spec.stop_ids = req.stop_ids;
  if (output->harmony != nullptr) {
    // A harmony reply ends with <|return|>, or <|call|> when it calls a
    // tool (the caller answers and asks again); <|end|> only ends one of
    // its messages.
    for (const char* end : {"<|return|>", "<|call|>"}) {
      const int32_t id = tokenizer_->AddedTokenId(end);
      if (id >= 0) spec.stop_ids.push_back(id);
    }
  }
  spec.top_logprobs = req.top_logprobs;
  spec.tokens_as_ids = req.tokens_as_ids;
  spec.ignore_eos = req.ignore_eos;
  spec.timeout = options_.limits.request_timeout;
  spec.timeout_is_a_length = options_.limits.timeout_ends_as_length;
  if (req.output_schema != nullptr) {
    // Every token adds at least a byte: with fewer tokens than the shortest
    // valid reply has bytes, the reply could be cut before it parses.
    const int64_t shortest =
        req.output_schema->node(req.output_schema->root()).min_bytes;
    if (spec.max_tokens < shortest) {
      return refuse(400, absl::StrCat("max_tokens (", spec.max_tokens,
                                      ") is below the ", shortest,
                                      " tokens the shortest reply matching "
                                      "the schema may take"));
    }
    absl::StatusOr<std::shared_ptr<const constrained::TokenPieces>> pieces =
        Pieces();
    if (!pieces.ok())
      return refuse(400, std::string(pieces.status().message()));
    spec.constraint = std::make_shared<constrained::JsonConstraint>(
        req.output_schema, *std::move(pieces));
  }
  auto started =
      Completion::Start(queue_, tokenizer_, std::move(spec), options_.metrics);
  if (!started.ok()) {
    return refuse(absl::IsResourceExhausted(started.status()) ? 429 : 503,
                  std::string(started.status().message()));
  }
  return started;
}

absl::StatusOr<HttpServer::Started> HttpServer::Begin(
    const CompletionRequest& req, bool chat, absl::string_view id_prefix,
    ChatOutputOptions* output, int* refusal, http::HttpResponse* res) {
  auto started = StartCompletion(req, chat, output, refusal);
  if (!started.ok()) {
    // Worth a retry: the queue moves, a worker comes back.
    if (*refusal == 429 || *refusal == 503) res->SetHeader("Retry-After", "1");
    return started.status();
  }
  static std::atomic<uint64_t> next_id{1};
  Started s;
  s.completion = *std::move(started);
  s.in_flight = InFlight();
  s.id = absl::StrCat(id_prefix, internal::UnixNow(), "-", next_id++);
  internal::CurrentRequest().id = s.id;
  internal::CurrentRequest().completion = s.completion;
  res->SetHeader("X-Request-Id", s.id);
  return s;
}

}  // namespace flotilla::coordinator::serve
