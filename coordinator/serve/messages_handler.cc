// POST /v1/messages: Anthropic's Messages API over the same engine and
// batching as the OpenAI routes. Replies are content blocks (thinking,
// text, tool_use) with a stop_reason (end_turn, max_tokens, stop_sequence,
// tool_use) and usage; with "stream": true they come as Anthropic's events
// (message_start, content_block_start/delta/stop, message_delta,
// message_stop). Errors are {"type": "error", "error": {"type", "message"}}.
// POST /v1/messages/count_tokens answers {"input_tokens"}.
#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "coordinator/serve/anthropic_request.h"
#include "coordinator/serve/chat_output.h"
#include "coordinator/serve/http_internal.h"
#include "coordinator/serve/http_server.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator::serve {
namespace {

// Anthropic's usage: input_tokens are the prompt tokens prefilled, and
// cache_read_input_tokens those resumed from the prefix cache (their sum is
// the prompt); nothing is ever "created" on request, the cache is automatic.
nlohmann::json Usage(const Completion& c) {
  const size_t cached = c.cached_tokens();
  return {{"input_tokens", c.prompt_tokens() - cached},
          {"cache_read_input_tokens", cached},
          {"cache_creation_input_tokens", 0},
          {"output_tokens", c.completion_tokens()}};
}

using internal::CurrentRequest;
using internal::Dump;
using json = nlohmann::json;

const char* ErrorType(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return "api_error";
  }
}

void AnthropicError(http::HttpResponse* res, int status,
                    const std::string& message) {
  res->Set(status, "application/json",
           Dump({{"type", "error"},
                 {"error", {{"type", ErrorType(status)}, {"message", message}}}}));
}

std::string Event(const std::string& name, const json& data) {
  return absl::StrCat("event: ", name, "\ndata: ", Dump(data), "\n\n");
}

// Content blocks opened and closed as the reply's deltas change kind.
class BlockStream {
 public:
  // Events for one delta.
  std::string Add(const ChatDelta& d) {
    std::string out;
    if (!d.reasoning.empty()) {
      out += Open("thinking", {{"type", "thinking"}, {"thinking", ""}});
      out += Delta({{"type", "thinking_delta"}, {"thinking", d.reasoning}});
    }
    if (!d.content.empty()) {
      out += Open("text", {{"type", "text"}, {"text", ""}});
      out += Delta({{"type", "text_delta"}, {"text", d.content}});
    }
    for (const ToolCallDelta& t : d.tool_calls) {
      if (!t.id.empty()) {
        out += Close();
        open_ = "tool_use";
        out += Event("content_block_start",
                     {{"type", "content_block_start"},
                      {"index", index_},
                      {"content_block",
                       {{"type", "tool_use"},
                        {"id", ToolUseId(t.id)},
                        {"name", t.name},
                        {"input", json::object()}}}});
      }
      if (!t.arguments.empty()) {
        out += Delta({{"type", "input_json_delta"}, {"partial_json", t.arguments}});
      }
    }
    return out;
  }
  std::string Close() {
    if (open_.empty()) return "";
    open_.clear();
    return Event("content_block_stop",
                 {{"type", "content_block_stop"}, {"index", index_++}});
  }

 private:
  std::string Open(const std::string& kind, json block) {
    if (open_ == kind) return "";
    std::string out = Close();
    open_ = kind;
    out += Event("content_block_start", {{"type", "content_block_start"},
                                         {"index", index_},
                                         {"content_block", std::move(block)}});
    return out;
  }
  std::string Delta(json delta) {
    return Event("content_block_delta", {{"type", "content_block_delta"},
                                         {"index", index_},
                                         {"delta", std::move(delta)}});
  }
  std::string open_;
  int index_ = 0;
};

std::string StopReason(const Completion& c, bool called) {
  if (called) return "tool_use";
  if (!c.stop_sequence().empty()) return "stop_sequence";
  return c.finish_reason() == "length" ? "max_tokens" : "end_turn";
}

json StopSequence(const Completion& c) {
  const std::string s = c.stop_sequence();
  return s.empty() ? json() : json(s);
}

}  // namespace

void HttpServer::Messages(const http::HttpRequest& http,
                          http::HttpResponse* res) {
  CurrentRequest().start = absl::Now();
  CurrentRequest().api = "messages";
  if (!AdmitAnthropic(http, res)) return;
  absl::StatusOr<nlohmann::ordered_json> chat =
      AnthropicToChat(http.body, /*count_only=*/false);
  if (!chat.ok()) {
    return AnthropicError(res, 400, std::string(chat.status().message()));
  }
  auto req = ParseCompletionRequestJson(*chat, /*chat=*/true, options_.limits);
  if (!req.ok()) return AnthropicError(res, 400, std::string(req.status().message()));
  ChatOutputOptions output_options;
  int refusal = 0;
  auto started = Begin(*req, true, "msg_", &output_options, &refusal, res);
  if (!started.ok()) {
    return AnthropicError(res, refusal,
                          std::string(started.status().message()));
  }
  std::shared_ptr<Completion> c = started->completion;
  std::shared_ptr<void> in_flight = started->in_flight;
  const std::string id = started->id;
  const std::string model_name = options_.model_name;
  if (!req->stream) {
    ChatOutput out(output_options);
    CompletionPiece piece;
    for (bool done = false; !done;) {
      done = c->Take(&piece);
      out.Feed(piece.text, piece.ids);
    }
    if (!c->status().ok()) return AnthropicError(res, 500, c->status().ToString());
    out.Finish();
    json content = json::array();
    if (!out.reasoning().empty()) {
      content.push_back({{"type", "thinking"}, {"thinking", out.reasoning()},
                         {"signature", ""}});
    }
    if (!out.content().empty()) {
      content.push_back({{"type", "text"}, {"text", out.content()}});
    }
    for (const ToolCall& call : out.tool_calls()) {
      json input = json::parse(call.arguments, nullptr, false);
      if (input.is_discarded()) input = json::object();
      content.push_back({{"type", "tool_use"},
                         {"id", ToolUseId(call.id)},
                         {"name", call.name},
                         {"input", std::move(input)}});
    }
    res->Set(200, "application/json",
             Dump({{"id", id},
                   {"type", "message"},
                   {"role", "assistant"},
                   {"model", model_name},
                   {"content", std::move(content)},
                   {"stop_reason", StopReason(*c, !out.tool_calls().empty())},
                   {"stop_sequence", StopSequence(*c)},
                   {"usage", Usage(*c)}}));
    return;
  }
  auto output = std::make_shared<ChatOutput>(output_options);
  auto blocks = std::make_shared<BlockStream>();
  auto first = std::make_shared<bool>(true);
  res->status = 200;
  res->content_type = "text/event-stream";
  res->stream = [=](std::string* out) {
    (void)in_flight;
    if (*first) {
      *first = false;
      *out = Event("message_start",
                   {{"type", "message_start"},
                    {"message",
                     {{"id", id},
                      {"type", "message"},
                      {"role", "assistant"},
                      {"model", model_name},
                      {"content", json::array()},
                      {"stop_reason", nullptr},
                      {"stop_sequence", nullptr},
                      {"usage", {{"input_tokens", c->prompt_tokens()},
                                 {"output_tokens", 0}}}}}}) +
             Event("ping", {{"type", "ping"}});
    }
    CompletionPiece piece;
    const bool done = c->Take(&piece);
    *out += blocks->Add(output->Feed(piece.text, piece.ids));
    if (!done) return true;
    if (!c->status().ok()) {
      *out += Event("error", {{"type", "error"},
                              {"error", {{"type", "api_error"},
                                         {"message", c->status().ToString()}}}});
      return false;
    }
    *out += blocks->Add(output->Finish());
    *out += blocks->Close();
    *out +=
        Event("message_delta",
              {{"type", "message_delta"},
               {"delta",
                {{"stop_reason", StopReason(*c, !output->tool_calls().empty())},
                 {"stop_sequence", StopSequence(*c)}}},
               {"usage", Usage(*c)}});
    *out += Event("message_stop", {{"type", "message_stop"}});
    return false;
  };
  res->stream_end = [c, in_flight](bool completed) {
    if (!completed) c->Cancel();
  };
}

void HttpServer::CountTokens(const http::HttpRequest& http,
                             http::HttpResponse* res) {
  if (!AdmitAnthropic(http, res)) return;
  absl::StatusOr<nlohmann::ordered_json> chat =
      AnthropicToChat(http.body, /*count_only=*/true);
  if (!chat.ok()) {
    return AnthropicError(res, 400, std::string(chat.status().message()));
  }
  auto req = ParseCompletionRequestJson(*chat, /*chat=*/true, options_.limits);
  if (!req.ok()) return AnthropicError(res, 400, std::string(req.status().message()));
  if (tokenizer_ == nullptr) {
    return AnthropicError(res, 400, "this model has no tokenizer");
  }
  absl::StatusOr<std::string> text =
      chat_format().Render(*req, options_.limits.max_prompt_bytes);
  if (!text.ok()) return AnthropicError(res, 400, std::string(text.status().message()));
  res->Set(200, "application/json",
           Dump({{"input_tokens", tokenizer_->Encode(*text).size()}}));
}

bool HttpServer::AdmitAnthropic(const http::HttpRequest& req,
                                http::HttpResponse* res) const {
  if (draining_) {
    AnthropicError(res, 503, "the server is shutting down");
    return false;
  }
  // Anthropic's clients send x-api-key; Bearer is accepted too.
  if (!options_.api_key.empty() && req.Header("x-api-key") != options_.api_key &&
      req.Header("Authorization") != "Bearer " + options_.api_key) {
    AnthropicError(res, 401, "a valid API key is required (x-api-key)");
    return false;
  }
  return true;
}

}  // namespace flotilla::coordinator::serve
