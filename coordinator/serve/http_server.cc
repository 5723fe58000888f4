#include "coordinator/serve/http_server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/serve/stop_text.h"
#include "nlohmann/json.hpp"
#include "shared/tokenizer/stream_decoder.h"

namespace flotilla::coordinator::serve {
namespace {

using json = nlohmann::json;

int64_t Now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Error(httplib::Response& res, int status, const std::string& message,
           const char* type = "invalid_request_error") {
  res.status = status;
  res.set_content(json{{"error",
                        {{"message", message},
                         {"type", type},
                         {"param", nullptr},
                         {"code", nullptr}}}}
                      .dump(),
                  "application/json");
}

// The text, finish and usage of one request, filled on the queue's thread
// and read on the HTTP thread.
struct Exchange {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> pieces;  // text not yet sent (streaming)
  std::string text;                // all text (non-streaming)
  bool done = false;
  absl::Status status;
  std::string finish_reason = "length";
  size_t prompt_tokens = 0, completion_tokens = 0;
  std::atomic<bool> cancelled{false};
  std::unique_ptr<tokenizer::StreamDecoder> decoder;
  std::unique_ptr<StopText> stop;
};

std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

HttpServer::HttpServer(LanguageModel* model,
                       const tokenizer::Tokenizer* tokenizer,
                       ServeOptions options)
    : model_(model), tokenizer_(tokenizer), options_(std::move(options)) {
  server_ = std::make_unique<httplib::Server>();
  queue_ = std::make_unique<GenerationQueue>(model_, options_.max_queue);
  Routes();
}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Start() {
  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.host);
  } else {
    port_ = server_->bind_to_port(options_.host, options_.port) ? options_.port
                                                                : -1;
  }
  if (port_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options_.host, ":", options_.port,
                     " (in use, or not an address of this machine)"));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
  if (queue_ != nullptr) queue_->Shutdown();
}

void HttpServer::Routes() {
  httplib::Server& s = *server_;
  s.set_payload_max_length(options_.limits.max_prompt_bytes + (64 << 10));
  s.set_pre_routing_handler([this](const httplib::Request& req,
                                   httplib::Response& res) {
    if (options_.api_key.empty() || !absl::StartsWith(req.path, "/v1/")) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (req.get_header_value("Authorization") != "Bearer " + options_.api_key) {
      Error(res, 401, "a valid API key is required (Authorization: Bearer)",
            "authentication_error");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(Dump({{"ready", true},
                          {"waiting", queue_->waiting()},
                          {"max_queue", options_.max_queue}}),
                    "application/json");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(Dump({{"object", "list"},
                          {"data",
                           {{{"id", options_.model_name},
                             {"object", "model"},
                             {"created", 0},
                             {"owned_by", "flotilla"}}}}}),
                    "application/json");
  });
  for (const bool chat : {false, true}) {
    s.Post(
        chat ? "/v1/chat/completions" : "/v1/completions",
        [this, chat](const httplib::Request& http, httplib::Response& res) {
          auto req = ParseCompletionRequest(http.body, chat, options_.limits);
          if (!req.ok())
            return Error(res, 400, std::string(req.status().message()));
          if (!req->model.empty() && req->model != options_.model_name) {
            return Error(res, 404,
                         absl::StrCat("model '", req->model,
                                      "' is not served here (this server "
                                      "serves '",
                                      options_.model_name, "')"),
                         "not_found_error");
          }
          std::vector<int32_t> prompt = req->prompt_ids;
          if (prompt.empty()) {
            if (tokenizer_ == nullptr) {
              return Error(res, 400,
                           "this model has no tokenizer: send the prompt as "
                           "token ids");
            }
            prompt = tokenizer_->Encode(
                chat ? RenderChat(options_.chat_template, req->messages)
                     : *req->prompt);
          }
          if (prompt.empty())
            return Error(res, 400, "the prompt has no tokens");
          if (static_cast<int>(prompt.size()) > options_.max_prompt_tokens) {
            return Error(res, 400,
                         absl::StrCat("the prompt is ", prompt.size(),
                                      " tokens; the limit is ",
                                      options_.max_prompt_tokens));
          }
          for (int32_t id : prompt) {
            if (id >= model_->vocab_size()) {
              return Error(res, 400,
                           absl::StrCat("token id ", id,
                                        " is outside the vocabulary of ",
                                        model_->vocab_size()));
            }
          }
          auto ex = std::make_shared<Exchange>();
          ex->prompt_tokens = prompt.size();
          if (tokenizer_ != nullptr) {
            // Primed with the prompt, so the completion's first piece keeps
            // its leading space (decoders strip it at the start of text).
            ex->decoder =
                std::make_unique<tokenizer::StreamDecoder>(tokenizer_);
            for (int32_t id : prompt) (void)ex->decoder->Next(id);
          }
          ex->stop = std::make_unique<StopText>(req->stop);
          GenerationJob job;
          job.prompt = std::move(prompt);
          job.options.max_tokens = req->max_tokens;
          job.options.sampler = req->sampler;
          job.options.stop_ids = req->stop_ids;
          if (tokenizer_ != nullptr) {
            for (int32_t id : tokenizer_->StopIds())
              job.options.stop_ids.push_back(id);
          }
          const bool stream = req->stream;
          job.on_token = [ex](int32_t id) {
            if (ex->cancelled) return false;
            std::string piece;
            if (ex->decoder != nullptr) {
              auto p = ex->decoder->Next(id);
              if (p.ok()) piece = *std::move(p);
            }
            std::lock_guard<std::mutex> lock(ex->mu);
            ++ex->completion_tokens;
            std::string text = ex->stop->Feed(piece);
            if (!text.empty()) {
              ex->pieces.push_back(text);
              ex->text += text;
            }
            ex->cv.notify_all();
            if (ex->stop->stopped()) {
              ex->finish_reason = "stop";
              return false;
            }
            return true;
          };
          job.on_done = [ex](absl::StatusOr<GenerateResult> r) {
            std::lock_guard<std::mutex> lock(ex->mu);
            if (!r.ok()) {
              ex->status = r.status();
            } else if (!ex->stop->stopped()) {
              ex->finish_reason = r->finish_reason;
              std::string rest;
              if (ex->decoder != nullptr) {
                auto p = ex->decoder->Finish();
                if (p.ok()) rest = *p;
              }
              rest = ex->stop->Feed(rest) + ex->stop->Flush();
              if (!rest.empty()) {
                ex->pieces.push_back(rest);
                ex->text += rest;
              }
            }
            ex->done = true;
            ex->cv.notify_all();
          };
          if (absl::Status st = queue_->Submit(std::move(job)); !st.ok()) {
            return Error(res, absl::IsResourceExhausted(st) ? 429 : 503,
                         std::string(st.message()),
                         absl::IsResourceExhausted(st) ? "rate_limit_error"
                                                       : "server_error");
          }
          static std::atomic<uint64_t> next_id{1};
          const std::string id =
              absl::StrCat(chat ? "chatcmpl-" : "cmpl-", Now(), "-", next_id++);
          const std::string model_name = options_.model_name;
          auto usage = [ex] {
            return json{
                {"prompt_tokens", ex->prompt_tokens},
                {"completion_tokens", ex->completion_tokens},
                {"total_tokens", ex->prompt_tokens + ex->completion_tokens}};
          };
          if (!stream) {
            std::unique_lock<std::mutex> lock(ex->mu);
            ex->cv.wait(lock, [&] { return ex->done; });
            if (!ex->status.ok()) {
              return Error(res, 500, ex->status.ToString(), "server_error");
            }
            json choice = {{"index", 0}, {"finish_reason", ex->finish_reason}};
            if (chat) {
              choice["message"] = {{"role", "assistant"},
                                   {"content", ex->text}};
            } else {
              choice["text"] = ex->text;
              choice["logprobs"] = nullptr;
            }
            res.set_content(
                Dump({{"id", id},
                      {"object", chat ? "chat.completion" : "text_completion"},
                      {"created", Now()},
                      {"model", model_name},
                      {"choices", json::array({choice})},
                      {"usage", usage()}}),
                "application/json");
            return;
          }
          const bool include_usage = req->include_usage;
          auto chunk = [=](json choice_delta, json finish) {
            json choice = {{"index", 0}, {"finish_reason", finish}};
            if (chat) {
              choice["delta"] = std::move(choice_delta);
            } else {
              choice["text"] = choice_delta.value("content", "");
              choice["logprobs"] = nullptr;
            }
            return "data: " +
                   Dump({{"id", id},
                         {"object",
                          chat ? "chat.completion.chunk" : "text_completion"},
                         {"created", Now()},
                         {"model", model_name},
                         {"choices", json::array({choice})}}) +
                   "\n\n";
          };
          auto started = std::make_shared<bool>(false);
          res.set_chunked_content_provider(
              "text/event-stream",
              [=](size_t, httplib::DataSink& sink) {
                if (chat && !*started) {
                  *started = true;
                  const std::string first =
                      chunk({{"role", "assistant"}, {"content", ""}}, nullptr);
                  if (!sink.write(first.data(), first.size())) {
                    ex->cancelled = true;
                    return false;
                  }
                }
                std::unique_lock<std::mutex> lock(ex->mu);
                ex->cv.wait(lock,
                            [&] { return ex->done || !ex->pieces.empty(); });
                while (!ex->pieces.empty()) {
                  const std::string data =
                      chunk({{"content", ex->pieces.front()}}, nullptr);
                  ex->pieces.pop_front();
                  if (!sink.write(data.data(), data.size())) {
                    ex->cancelled = true;
                    return false;
                  }
                }
                if (!ex->done) return true;
                std::string tail;
                if (!ex->status.ok()) {
                  tail = "data: " +
                         Dump({{"error",
                                {{"message", ex->status.ToString()},
                                 {"type", "server_error"}}}}) +
                         "\n\n";
                } else {
                  tail = chunk(json::object(), ex->finish_reason);
                  if (include_usage) {
                    tail += "data: " +
                            Dump({{"id", id},
                                  {"object", chat ? "chat.completion.chunk"
                                                  : "text_completion"},
                                  {"created", Now()},
                                  {"model", model_name},
                                  {"choices", json::array()},
                                  {"usage", usage()}}) +
                            "\n\n";
                  }
                }
                tail += "data: [DONE]\n\n";
                sink.write(tail.data(), tail.size());
                sink.done();
                return true;
              },
              [ex](bool) { ex->cancelled = true; });
        });
  }
}

}  // namespace flotilla::coordinator::serve
