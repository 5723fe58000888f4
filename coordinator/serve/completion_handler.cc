// The two completion routes (POST /v1/completions, /v1/chat/completions):
// a request parsed, checked against the model and its limits, queued, and
// answered whole or as server-sent events.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "coordinator/serve/chat_output.h"
#include "coordinator/serve/completion_job.h"
#include "coordinator/serve/completion_request.h"
#include "coordinator/serve/http_internal.h"
#include "coordinator/serve/http_server.h"
#include "coordinator/serve/logprobs_json.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator::serve {

using internal::CurrentRequest;
using internal::Dump;
using internal::Error;
using internal::Failed;
using internal::UnixNow;
using json = nlohmann::json;

void HttpServer::Complete(const http::HttpRequest& http,
                          http::HttpResponse* res, bool chat) {
  // Counted and logged as this API whatever the answer (a refusal too).
  CurrentRequest().start = absl::Now();
  CurrentRequest().api = chat ? "chat" : "completions";
  if (!Admit(http, res)) return;
  auto req = ParseCompletionRequest(http.body, chat, options_.limits);
  if (!req.ok()) return Error(res, 400, std::string(req.status().message()));
  ChatOutputOptions output_options;
  int refusal = 0;
  auto started = Begin(*req, chat, chat ? "chatcmpl-" : "cmpl-",
                       &output_options, &refusal, res);
  if (!started.ok()) {
    return Error(res, refusal, std::string(started.status().message()));
  }
  std::shared_ptr<Completion> c = started->completion;
  std::shared_ptr<void> in_flight = started->in_flight;
  const std::string id = started->id;
  const std::string model_name = options_.model_name;
  const char* object = chat ? "chat.completion.chunk" : "text_completion";
  auto usage = [c] {
    return json{
        {"prompt_tokens", c->prompt_tokens()},
        {"completion_tokens", c->completion_tokens()},
        {"total_tokens", c->prompt_tokens() + c->completion_tokens()},
        {"prompt_tokens_details", {{"cached_tokens", c->cached_tokens()}}}};
  };
  const bool logprobs = req->top_logprobs >= 0;
  if (!req->stream) {
    std::string text;
    std::vector<int32_t> ids;
    std::vector<TokenLogprob> lps;
    CompletionPiece piece;
    for (bool done = false; !done;) {
      done = c->Take(&piece);
      text += piece.text;
      ids.insert(ids.end(), piece.ids.begin(), piece.ids.end());
      lps.insert(lps.end(), piece.logprobs.begin(), piece.logprobs.end());
    }
    if (!c->status().ok()) return Failed(res, c->status());
    json choice = {{"index", 0}, {"finish_reason", c->finish_reason()}};
    size_t offset = 0;
    if (chat) {
      ChatOutput out(output_options);
      out.Feed(text, ids);
      out.Finish();
      json message = {{"role", "assistant"}, {"content", out.content()}};
      if (!out.reasoning().empty()) message["reasoning_content"] = out.reasoning();
      if (!out.tool_calls().empty()) {
        json calls = json::array();
        for (const ToolCall& call : out.tool_calls()) {
          calls.push_back({{"id", call.id},
                           {"type", "function"},
                           {"function",
                            {{"name", call.name}, {"arguments", call.arguments}}}});
        }
        message["tool_calls"] = std::move(calls);
        if (out.content().empty()) message["content"] = nullptr;
        choice["finish_reason"] = "tool_calls";
      }
      choice["message"] = std::move(message);
      if (logprobs) choice["logprobs"] = ChatLogprobs(lps);
    } else {
      choice["text"] = text;
      choice["logprobs"] = logprobs ? CompletionLogprobs(lps, &offset) : json();
    }
    res->Set(200, "application/json",
             Dump({{"id", id},
                   {"object", chat ? "chat.completion" : "text_completion"},
                   {"created", UnixNow()},
                   {"model", model_name},
                   {"choices", json::array({choice})},
                   {"usage", usage()}}));
    return;
  }
  auto event = [=](json choices, json extra) {
    json j = {{"id", id},
              {"object", object},
              {"created", UnixNow()},
              {"model", model_name},
              {"choices", std::move(choices)}};
    for (auto& [k, v] : extra.items()) j[k] = v;
    return "data: " + Dump(j) + "\n\n";
  };
  auto offset = std::make_shared<size_t>(0);
  auto output = std::make_shared<ChatOutput>(output_options);
  auto chunk = [=](const CompletionPiece& piece, json finish,
                   const ChatDelta& d) {
    json choice = {{"index", 0}, {"finish_reason", std::move(finish)}};
    if (chat) {
      json delta = json::object();
      if (!d.content.empty()) delta["content"] = d.content;
      if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
      if (!d.tool_calls.empty()) {
        json calls = json::array();
        for (const ToolCallDelta& t : d.tool_calls) {
          json call = {{"index", t.index}};
          json function = {{"arguments", t.arguments}};
          if (!t.id.empty()) {
            call["id"] = t.id;
            call["type"] = "function";
            function["name"] = t.name;
          }
          call["function"] = std::move(function);
          calls.push_back(std::move(call));
        }
        delta["tool_calls"] = std::move(calls);
      }
      choice["delta"] = std::move(delta);
      if (logprobs) choice["logprobs"] = ChatLogprobs(piece.logprobs);
    } else {
      choice["text"] = piece.text;
      choice["logprobs"] =
          logprobs ? CompletionLogprobs(piece.logprobs, offset.get()) : json();
    }
    return event(json::array({choice}), json::object());
  };
  const bool include_usage = req->include_usage;
  auto first = std::make_shared<bool>(true);
  res->status = 200;
  res->content_type = "text/event-stream";
  res->stream = [=](std::string* out) {
    (void)in_flight;  // held until the stream is done
    if (chat && *first) {
      json choice = {{"index", 0},
                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                     {"finish_reason", nullptr}};
      *out = event(json::array({choice}), json::object());
    }
    *first = false;
    CompletionPiece piece;
    const bool done = c->Take(&piece);
    const ChatDelta d = chat ? output->Feed(piece.text, piece.ids) : ChatDelta();
    if ((chat ? !d.empty() : !piece.text.empty()) || !piece.logprobs.empty()) {
      *out += chunk(piece, nullptr, d);
    }
    if (!done) return true;
    if (!c->status().ok()) {
      *out += "data: " +
              Dump({{"error",
                     {{"message", c->status().ToString()},
                      {"type", absl::IsDeadlineExceeded(c->status())
                                   ? "timeout_error"
                                   : "server_error"}}}}) +
              "\n\n";
    } else {
      const ChatDelta last = chat ? output->Finish() : ChatDelta();
      if (!last.empty()) *out += chunk(CompletionPiece(), nullptr, last);
      const bool called = chat && !output->tool_calls().empty();
      *out += chunk(CompletionPiece(), called ? "tool_calls" : c->finish_reason(),
                    ChatDelta());
      if (include_usage) *out += event(json::array(), {{"usage", usage()}});
    }
    *out += "data: [DONE]\n\n";
    return false;
  };
  // Cut short (the client went away): the sequence leaves the batch.
  res->stream_end = [c, in_flight](bool completed) {
    if (!completed) c->Cancel();
  };
}

}  // namespace flotilla::coordinator::serve
