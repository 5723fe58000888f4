// POST /v1/responses: OpenAI's Responses API over the same engine and
// batching as the other routes (the request is translated into a chat
// request, responses_request.h). The reply is a response object whose
// output holds reasoning, message (output_text) and function_call items;
// with "stream": true it comes as the API's events: response.created,
// response.in_progress, response.output_item.added, content_part.added,
// output_text.delta / done, reasoning_text.delta / done,
// function_call_arguments.delta / done, output_item.done, and
// response.completed (response.incomplete past max_output_tokens), each
// with its sequence_number.
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "coordinator/serve/chat_output.h"
#include "coordinator/serve/http_internal.h"
#include "coordinator/serve/http_server.h"
#include "coordinator/serve/responses_request.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator::serve {
namespace {

using internal::CurrentRequest;
using internal::Dump;

// Output items as they are built: the reply's deltas open, grow and close
// them, and each step's events are said in order.
class ResponseItems {
 public:
  explicit ResponseItems(std::string id) : id_(std::move(id)) {}

  // Events for one delta (streaming), the items grown either way.
  std::string Add(const ChatDelta& d) {
    std::string out;
    if (!d.reasoning.empty()) {
      out += Open("reasoning");
      items_.back()["content"][0]["text"] =
          items_.back()["content"][0]["text"].get<std::string>() + d.reasoning;
      out += Event("response.reasoning_text.delta",
                   {{"item_id", items_.back()["id"]},
                    {"output_index", Index()},
                    {"content_index", 0},
                    {"delta", d.reasoning}});
    }
    if (!d.content.empty()) {
      out += Open("message");
      nlohmann::json& part = items_.back()["content"][0];
      part["text"] = part["text"].get<std::string>() + d.content;
      out += Event("response.output_text.delta",
                   {{"item_id", items_.back()["id"]},
                    {"output_index", Index()},
                    {"content_index", 0},
                    {"delta", d.content},
                    {"logprobs", nlohmann::json::array()}});
    }
    for (const ToolCallDelta& t : d.tool_calls) {
      if (!t.id.empty()) {
        out += Close();
        open_ = "function_call";
        items_.push_back({{"id", absl::StrCat("fc_", t.id.substr(5))},
                          {"type", "function_call"},
                          {"status", "in_progress"},
                          {"arguments", ""},
                          {"call_id", t.id},
                          {"name", t.name}});
        out += Event("response.output_item.added",
                     {{"output_index", Index()}, {"item", items_.back()}});
      }
      if (!t.arguments.empty() && open_ == "function_call") {
        nlohmann::json& call = items_.back();
        call["arguments"] = call["arguments"].get<std::string>() + t.arguments;
        out += Event("response.function_call_arguments.delta",
                     {{"item_id", call["id"]},
                      {"output_index", Index()},
                      {"delta", t.arguments}});
      }
    }
    return out;
  }

  std::string Close() {
    if (open_.empty()) return "";
    nlohmann::json& item = items_.back();
    item["status"] = "completed";
    std::string out;
    if (open_ == "message") {
      const nlohmann::json& part = item["content"][0];
      out += Event("response.output_text.done",
                   {{"item_id", item["id"]},
                    {"output_index", Index()},
                    {"content_index", 0},
                    {"text", part["text"]},
                    {"logprobs", nlohmann::json::array()}});
      out += Event("response.content_part.done", {{"item_id", item["id"]},
                                                  {"output_index", Index()},
                                                  {"content_index", 0},
                                                  {"part", part}});
    } else if (open_ == "reasoning") {
      out += Event("response.reasoning_text.done",
                   {{"item_id", item["id"]},
                    {"output_index", Index()},
                    {"content_index", 0},
                    {"text", item["content"][0]["text"]}});
    } else {
      out += Event("response.function_call_arguments.done",
                   {{"item_id", item["id"]},
                    {"output_index", Index()},
                    {"arguments", item["arguments"]}});
    }
    out += Event("response.output_item.done",
                 {{"output_index", Index()}, {"item", item}});
    open_.clear();
    return out;
  }

  // One server-sent event, numbered.
  std::string Event(const std::string& type, nlohmann::json data) {
    nlohmann::json e = {{"type", type}, {"sequence_number", sequence_++}};
    for (auto it = data.begin(); it != data.end(); ++it) e[it.key()] = *it;
    return absl::StrCat("event: ", type, "\ndata: ", Dump(e), "\n\n");
  }

  const nlohmann::json& items() const { return items_; }
  bool called() const {
    for (const nlohmann::json& item : items_) {
      if (item["type"] == "function_call") return true;
    }
    return false;
  }

 private:
  std::string Open(const std::string& kind) {
    if (open_ == kind) return "";
    std::string out = Close();
    open_ = kind;
    const std::string n = absl::StrCat(id_.substr(5), "_", items_.size());
    if (kind == "reasoning") {
      items_.push_back(
          {{"id", "rs_" + n},
           {"type", "reasoning"},
           {"summary", nlohmann::json::array()},
           {"content", nlohmann::json::array(
                           {{{"type", "reasoning_text"}, {"text", ""}}})}});
      out += Event("response.output_item.added",
                   {{"output_index", Index()}, {"item", items_.back()}});
      return out;
    }
    items_.push_back({{"id", "msg_" + n},
                      {"type", "message"},
                      {"status", "in_progress"},
                      {"role", "assistant"},
                      {"content", nlohmann::json::array()}});
    out += Event("response.output_item.added",
                 {{"output_index", Index()}, {"item", items_.back()}});
    const nlohmann::json part = {{"type", "output_text"},
                                 {"text", ""},
                                 {"annotations", nlohmann::json::array()},
                                 {"logprobs", nlohmann::json::array()}};
    out +=
        Event("response.content_part.added", {{"item_id", items_.back()["id"]},
                                              {"output_index", Index()},
                                              {"content_index", 0},
                                              {"part", part}});
    items_.back()["content"].push_back(part);
    return out;
  }
  size_t Index() const { return items_.size() - 1; }

  const std::string id_;
  nlohmann::json items_ = nlohmann::json::array();
  std::string open_;
  int sequence_ = 0;
};

// The response object: `status` completed or incomplete (max_output_tokens
// or the context reached), the request's settings echoed.
nlohmann::json ResponseObject(const std::string& id, const std::string& model,
                              const ResponsesRequest& request,
                              const nlohmann::json& output, const Completion* c,
                              const std::string& status) {
  nlohmann::json r = {
      {"id", id},
      {"object", "response"},
      {"created_at", internal::UnixNow()},
      {"status", status},
      {"error", nullptr},
      {"incomplete_details", nullptr},
      {"model", model},
      {"output", output},
      {"parallel_tool_calls",
       request.echo.value("parallel_tool_calls", nlohmann::json(true))},
      {"previous_response_id", nullptr},
      {"store", false},
      {"tool_choice",
       request.echo.value("tool_choice", nlohmann::json("auto"))},
      {"tools", request.echo.value("tools", nlohmann::json::array())},
      {"text", request.echo.value(
                   "text", nlohmann::json{{"format", {{"type", "text"}}}})},
      {"truncation", "disabled"},
      {"metadata", request.echo.value("metadata", nlohmann::json::object())}};
  for (const char* key :
       {"instructions", "temperature", "top_p", "max_output_tokens",
        "reasoning", "user", "prompt_cache_key"}) {
    r[key] = request.echo.value(key, nlohmann::json());
  }
  if (status == "incomplete") {
    r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  }
  if (c != nullptr) {
    const size_t cached = c->cached_tokens();
    r["usage"] = {
        {"input_tokens", c->prompt_tokens()},
        {"input_tokens_details", {{"cached_tokens", cached}}},
        {"output_tokens", c->completion_tokens()},
        {"output_tokens_details", {{"reasoning_tokens", 0}}},
        {"total_tokens", c->prompt_tokens() + c->completion_tokens()}};
  } else {
    r["usage"] = nullptr;
  }
  return r;
}

std::string Status(const Completion& c, const ResponseItems& items) {
  return c.finish_reason() == "length" && !items.called() ? "incomplete"
                                                          : "completed";
}

// Hosted tools the request offered that this server does not run: said
// once per kind in the log, not on every request.
void SayOnce(const std::vector<std::string>& skipped) {
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  for (const std::string& type : skipped) {
    if (said.insert(type).second) {
      std::fprintf(stderr,
                   "flotilla-coordinator: /v1/responses: tools of type '%s' "
                   "need a service this server does not run; not offered to "
                   "the model\n",
                   type.c_str());
    }
  }
}

}  // namespace

void HttpServer::Responses(const http::HttpRequest& http,
                           http::HttpResponse* res) {
  CurrentRequest().start = absl::Now();
  CurrentRequest().api = "responses";
  if (!Admit(http, res)) return;
  absl::StatusOr<ResponsesRequest> request = ResponsesToChat(http.body);
  if (!request.ok()) {
    return internal::Error(res, 400, std::string(request.status().message()));
  }
  SayOnce(request->skipped_tools);
  // No max_output_tokens: OpenAI sets no small default here, so the reply
  // may run to --max-completion-tokens (cut to the context left), not to
  // the chat route's short default.
  if (!request->chat.contains("max_tokens")) {
    request->chat["max_tokens"] = options_.limits.max_tokens;
  }
  auto req =
      ParseCompletionRequestJson(request->chat, /*chat=*/true, options_.limits);
  if (!req.ok()) {
    return internal::Error(res, 400, std::string(req.status().message()));
  }
  ChatOutputOptions output_options;
  int refusal = 0;
  auto started = Begin(*req, true, "resp_", &output_options, &refusal, res);
  if (!started.ok()) {
    return internal::Error(res, refusal,
                           std::string(started.status().message()));
  }
  std::shared_ptr<Completion> c = started->completion;
  std::shared_ptr<void> in_flight = started->in_flight;
  const std::string id = started->id;
  const std::string model_name = options_.model_name;
  auto output = std::make_shared<ChatOutput>(output_options);
  auto items = std::make_shared<ResponseItems>(id);
  auto shared_request =
      std::make_shared<const ResponsesRequest>(*std::move(request));
  if (!req->stream) {
    CompletionPiece piece;
    for (bool done = false; !done;) {
      done = c->Take(&piece);
      items->Add(output->Feed(piece.text, piece.ids));
    }
    if (!c->status().ok()) {
      return internal::Error(res, 500, c->status().ToString());
    }
    items->Add(output->Finish());
    items->Close();
    res->Set(200, "application/json",
             Dump(ResponseObject(id, model_name, *shared_request,
                                 items->items(), c.get(), Status(*c, *items))));
    return;
  }
  auto first = std::make_shared<bool>(true);
  res->status = 200;
  res->content_type = "text/event-stream";
  res->stream = [=](std::string* out) {
    (void)in_flight;
    if (*first) {
      *first = false;
      const nlohmann::json created =
          ResponseObject(id, model_name, *shared_request,
                         nlohmann::json::array(), nullptr, "in_progress");
      // Two statements: the numbering follows the order written.
      *out = items->Event("response.created", {{"response", created}});
      *out += items->Event("response.in_progress", {{"response", created}});
    }
    CompletionPiece piece;
    const bool done = c->Take(&piece);
    *out += items->Add(output->Feed(piece.text, piece.ids));
    if (!done) return true;
    if (!c->status().ok()) {
      nlohmann::json failed = ResponseObject(id, model_name, *shared_request,
                                             items->items(), c.get(), "failed");
      failed["error"] = {{"code", "server_error"},
                         {"message", c->status().ToString()}};
      *out += items->Event("response.failed", {{"response", failed}});
      return false;
    }
    *out += items->Add(output->Finish());
    *out += items->Close();
    const std::string status = Status(*c, *items);
    *out += items->Event(
        status == "completed" ? "response.completed" : "response.incomplete",
        {{"response", ResponseObject(id, model_name, *shared_request,
                                     items->items(), c.get(), status)}});
    return false;
  };
  res->stream_end = [c, in_flight](bool completed) {
    if (!completed) c->Cancel();
  };
}

}  // namespace flotilla::coordinator::serve
