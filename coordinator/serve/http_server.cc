#include "coordinator/serve/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/serve/chat_page.h"
#include "coordinator/serve/completion_job.h"
#include "coordinator/serve/logprobs_json.h"
#include "nlohmann/json.hpp"
#include "shared/base/status_macros.h"
#include "shared/http/listen.h"

namespace flotilla::coordinator::serve {
namespace {

using json = nlohmann::json;

// The request a connection thread is on: httplib runs a request's
// pre-routing handler, route handler, streamed body and logger on one
// thread, so the logger finds here what the handler learned.
struct RequestContext {
  absl::Time start;
  std::string api;  // "completions" or "chat"; empty: not a completion
  std::string id;
  std::shared_ptr<Completion> completion;
};
thread_local RequestContext tls_request;

int64_t Now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void Error(httplib::Response& res, int status, const std::string& message,
           const char* type = "invalid_request_error") {
  res.status = status;
  res.set_content(Dump({{"error",
                         {{"message", message},
                          {"type", type},
                          {"param", nullptr},
                          {"code", nullptr}}}}),
                  "application/json");
}

// A request that ran and failed: 504 when its time ran out, 503 when the
// server cannot run it now (an expert without a live worker, shutting
// down: worth a retry), else 500.
void Failed(httplib::Response& res, const absl::Status& status) {
  if (absl::IsDeadlineExceeded(status)) {
    return Error(res, 504, std::string(status.message()), "timeout_error");
  }
  if (absl::IsUnavailable(status)) {
    res.set_header("Retry-After", "1");
    return Error(res, 503, status.ToString(), "server_error");
  }
  Error(res, 500, status.ToString(), "server_error");
}

}  // namespace

HttpServer::HttpServer(LanguageModel* model,
                       const tokenizer::Tokenizer* tokenizer,
                       GenerationQueue* queue, ServeOptions options)
    : model_(model),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      queue_(queue) {
  server_ = std::make_unique<httplib::Server>();
  Routes();
}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Start() {
  FLOTILLA_ASSIGN_OR_RETURN(
      port_, http::StartListening(server_.get(), options_.host, options_.port,
                                  &thread_));
  return absl::OkStatus();
}

std::shared_ptr<void> HttpServer::InFlight() {
  {
    std::lock_guard<std::mutex> lock(in_flight_mu_);
    ++in_flight_;
  }
  return std::shared_ptr<void>(nullptr, [this](void*) {
    std::lock_guard<std::mutex> lock(in_flight_mu_);
    --in_flight_;
    in_flight_cv_.notify_all();
  });
}

bool HttpServer::Drain(absl::Duration timeout) {
  draining_ = true;
  std::unique_lock<std::mutex> lock(in_flight_mu_);
  return in_flight_cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                                [this] { return in_flight_ == 0; });
}

void HttpServer::Stop() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

bool HttpServer::Admit(const httplib::Request& req,
                       httplib::Response& res) const {
  if (draining_ && req.method == "POST") {
    Error(res, 503, "the server is shutting down", "server_error");
    return false;
  }
  if (!options_.api_key.empty() &&
      req.get_header_value("Authorization") != "Bearer " + options_.api_key) {
    Error(res, 401, "a valid API key is required (Authorization: Bearer)",
          "authentication_error");
    return false;
  }
  return true;
}

void HttpServer::Routes() {
  httplib::Server& s = *server_;
  s.set_payload_max_length(options_.limits.max_prompt_bytes + (64 << 10));
  // Every waiting and running request holds a connection thread (it
  // blocks on its completion), plus a few for health checks and the page.
  const size_t threads =
      std::min<size_t>(1024, options_.max_queue + options_.max_batch + 4);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_logger([this](const httplib::Request&, const httplib::Response& res) {
    RequestContext ctx = std::move(tls_request);
    tls_request = RequestContext();
    if (ctx.api.empty()) return;
    const double total = absl::ToDoubleSeconds(absl::Now() - ctx.start);
    const Completion* c = ctx.completion.get();
    const size_t prompt = c ? c->prompt_tokens() : 0;
    const size_t generated = c ? c->completion_tokens() : 0;
    const double ttft = c ? c->ttft_seconds() : 0;
    if (options_.metrics != nullptr) {
      options_.metrics->RequestDone(ctx.api, res.status, prompt, generated,
                                    ttft, total);
    }
    if (options_.access_log) {
      std::fprintf(stderr,
                   "flotilla-coordinator: request id=%s api=%s model=%s "
                   "status=%d prompt_tokens=%zu completion_tokens=%zu "
                   "ttft_s=%.3f total_s=%.3f\n",
                   ctx.id.empty() ? "-" : ctx.id.c_str(), ctx.api.c_str(),
                   options_.model_name.c_str(), res.status, prompt, generated,
                   ttft, total);
    }
  });
  s.set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) {
        tls_request = RequestContext();
        tls_request.start = absl::Now();
        if (req.method == "POST" && absl::StartsWith(req.path, "/v1/")) {
          tls_request.api = absl::EndsWith(req.path, "/chat/completions")
                                ? "chat"
                                : "completions";
        }
        // Refusals (401, 503) are answered by the handlers, not here: httplib
        // calls this before it reads a POST's body, and a body left unread on
        // a keep-alive connection is parsed as the next request (a client that
        // reused the connection got "400 (no body)" for its next call).
        return httplib::Server::HandlerResponse::Unhandled;
      });
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(ChatPageHtml(), "text/html; charset=utf-8");
  });
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    const std::string missing =
        options_.missing_experts ? options_.missing_experts() : "";
    const bool ready = !draining_ && missing.empty();
    if (!ready) res.status = 503;
    json body = {{"ready", ready},
                 {"waiting", queue_->waiting()},
                 {"max_queue", options_.max_queue}};
    if (!missing.empty()) body["missing_experts"] = missing;
    res.set_content(Dump(body), "application/json");
  });
  s.Get("/v1/models",
        [this](const httplib::Request& http, httplib::Response& res) {
          if (!Admit(http, res)) return;
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
          if (!Admit(http, res)) return;
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
          CompletionSpec spec;
          spec.prompt = std::move(prompt);
          spec.max_tokens = req->max_tokens;
          spec.max_tokens_given = req->max_tokens_given;
          spec.sampler = req->sampler;
          FitDefaultMaxTokens(&spec, options_.limits);
          if (absl::Status st = CheckCompletionSpec(spec, model_->vocab_size(),
                                                    options_.limits);
              !st.ok()) {
            return Error(res, 400, std::string(st.message()));
          }
          spec.stop = req->stop;
          spec.stop_ids = req->stop_ids;
          spec.top_logprobs = req->top_logprobs;
          spec.tokens_as_ids = req->tokens_as_ids;
          spec.ignore_eos = req->ignore_eos;
          spec.timeout = options_.limits.request_timeout;
          auto started = Completion::Start(queue_, tokenizer_, std::move(spec),
                                           options_.metrics);
          if (!started.ok()) {
            const bool full = absl::IsResourceExhausted(started.status());
            return Error(res, full ? 429 : 503,
                         std::string(started.status().message()),
                         full ? "rate_limit_error" : "server_error");
          }
          std::shared_ptr<Completion> c = *std::move(started);
          std::shared_ptr<void> in_flight = InFlight();
          static std::atomic<uint64_t> next_id{1};
          const std::string id =
              absl::StrCat(chat ? "chatcmpl-" : "cmpl-", Now(), "-", next_id++);
          const std::string model_name = options_.model_name;
          tls_request.id = id;
          tls_request.completion = c;
          res.set_header("X-Request-Id", id);
          const char* object =
              chat ? "chat.completion.chunk" : "text_completion";
          auto usage = [c] {
            return json{
                {"prompt_tokens", c->prompt_tokens()},
                {"completion_tokens", c->completion_tokens()},
                {"total_tokens", c->prompt_tokens() + c->completion_tokens()}};
          };
          const bool logprobs = req->top_logprobs >= 0;
          if (!req->stream) {
            std::string text;
            std::vector<TokenLogprob> lps;
            CompletionPiece piece;
            for (bool done = false; !done;) {
              done = c->Take(&piece);
              text += piece.text;
              lps.insert(lps.end(), piece.logprobs.begin(),
                         piece.logprobs.end());
            }
            if (!c->status().ok()) return Failed(res, c->status());
            json choice = {{"index", 0}, {"finish_reason", c->finish_reason()}};
            size_t offset = 0;
            if (chat) {
              choice["message"] = {{"role", "assistant"}, {"content", text}};
              if (logprobs) choice["logprobs"] = ChatLogprobs(lps);
            } else {
              choice["text"] = text;
              choice["logprobs"] =
                  logprobs ? CompletionLogprobs(lps, &offset) : json();
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
          auto event = [=](json choices, json extra) {
            json j = {{"id", id},
                      {"object", object},
                      {"created", Now()},
                      {"model", model_name},
                      {"choices", std::move(choices)}};
            for (auto& [k, v] : extra.items()) j[k] = v;
            return "data: " + Dump(j) + "\n\n";
          };
          auto offset = std::make_shared<size_t>(0);
          auto chunk = [=](const CompletionPiece& piece, json finish) {
            json choice = {{"index", 0}, {"finish_reason", std::move(finish)}};
            if (chat) {
              choice["delta"] = {{"content", piece.text}};
              if (logprobs) choice["logprobs"] = ChatLogprobs(piece.logprobs);
            } else {
              choice["text"] = piece.text;
              choice["logprobs"] =
                  logprobs ? CompletionLogprobs(piece.logprobs, offset.get())
                           : json();
            }
            return event(json::array({choice}), json::object());
          };
          const bool include_usage = req->include_usage;
          auto first = std::make_shared<bool>(true);
          res.set_chunked_content_provider(
              "text/event-stream",
              [=](size_t, httplib::DataSink& sink) {
                (void)in_flight;  // held until the stream is done
                std::string out;
                if (chat && *first) {
                  json choice = {
                      {"index", 0},
                      {"delta", {{"role", "assistant"}, {"content", ""}}},
                      {"finish_reason", nullptr}};
                  out = event(json::array({choice}), json::object());
                }
                *first = false;
                CompletionPiece piece;
                const bool done = c->Take(&piece);
                if (!piece.text.empty() || !piece.logprobs.empty()) {
                  out += chunk(piece, nullptr);
                }
                if (done) {
                  if (!c->status().ok()) {
                    out +=
                        "data: " +
                        Dump({{"error",
                               {{"message", c->status().ToString()},
                                {"type", absl::IsDeadlineExceeded(c->status())
                                             ? "timeout_error"
                                             : "server_error"}}}}) +
                        "\n\n";
                  } else {
                    out += chunk(CompletionPiece(), c->finish_reason());
                    if (include_usage)
                      out += event(json::array(), {{"usage", usage()}});
                  }
                  out += "data: [DONE]\n\n";
                }
                if (!out.empty() && !sink.write(out.data(), out.size())) {
                  c->Cancel();  // the client went away
                  return false;
                }
                if (done) sink.done();
                return true;
              },
              [c, in_flight](bool) { c->Cancel(); });
        });
  }
}

}  // namespace flotilla::coordinator::serve
