#include "coordinator/serve/http_server.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "coordinator/serve/chat_page.h"
#include "coordinator/serve/chat_format.h"
#include "coordinator/serve/completion_request.h"
#include "coordinator/serve/http_internal.h"
#include "nlohmann/json.hpp"
#include "shared/model/json_util.h"

namespace flotilla::coordinator::serve {
namespace internal {

RequestContext& CurrentRequest() {
  thread_local RequestContext context;
  return context;
}

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Error(http::HttpResponse* res, int status, const std::string& message) {
  res->Set(status, "application/json", http::JsonErrorBody(status, message));
}

int FailedStatus(const absl::Status& status) {
  if (absl::IsDeadlineExceeded(status)) return 504;
  if (absl::IsUnavailable(status)) return 503;
  return 500;
}

void Failed(http::HttpResponse* res, const absl::Status& status) {
  const int code = FailedStatus(status);
  if (code == 504) return Error(res, 504, std::string(status.message()));
  if (code == 503) res->SetHeader("Retry-After", "1");
  Error(res, code, status.ToString());
}

}  // namespace internal

using internal::CurrentRequest;
using internal::Dump;
using internal::Error;
using json = nlohmann::json;

HttpServer::HttpServer(LanguageModel* model,
                       const tokenizer::Tokenizer* tokenizer,
                       GenerationQueue* queue, ServeOptions options)
    : model_(model),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      queue_(queue) {
  http::HttpServiceOptions o;
  o.host = options_.host;
  o.port = options_.port;
  // The largest prompt, and room for the JSON around it.
  o.max_body_bytes = options_.limits.max_prompt_bytes + (64 << 10);
  o.max_connections = options_.max_connections;
  o.cors_origin = options_.cors_origin;
  server_ = std::make_unique<http::HttpService>(std::move(o));
  Routes();
}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Start() { return server_->Start(); }

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
  if (server_ != nullptr) server_->Stop();
}

bool HttpServer::Admit(const http::HttpRequest& req,
                       http::HttpResponse* res) const {
  if (draining_ && req.method == "POST") {
    Error(res, 503, "the server is shutting down");
    return false;
  }
  // Compared whole: a key followed by anything (a NUL, more text) is
  // another key.
  if (!options_.api_key.empty() &&
      req.Header("Authorization") != "Bearer " + options_.api_key) {
    Error(res, 401, "a valid API key is required (Authorization: Bearer)");
    return false;
  }
  return true;
}

void HttpServer::Routes() {
  http::HttpService& s = *server_;
  s.SetLogger([this](const http::HttpRequest&, const http::HttpResponse& res) {
    internal::RequestContext ctx = std::move(CurrentRequest());
    CurrentRequest() = internal::RequestContext();
    if (ctx.api.empty()) return;
    // nginx's 499: the client closed the connection before the answer's
    // end. A stream that had sent its 200 and then failed (an expert worker
    // lost, the time out) is counted and logged as the failure it was.
    int status = res.completed ? res.status : 499;
    if (status == 200 && ctx.completion != nullptr &&
        !ctx.completion->status().ok()) {
      status = internal::FailedStatus(ctx.completion->status());
    }
    const double total = absl::ToDoubleSeconds(absl::Now() - ctx.start);
    const Completion* c = ctx.completion.get();
    const size_t prompt = c ? c->prompt_tokens() : 0;
    const size_t generated = c ? c->completion_tokens() : 0;
    const double ttft = c ? c->ttft_seconds() : 0;
    if (options_.metrics != nullptr) {
      options_.metrics->RequestDone(ctx.api, status, prompt, generated, ttft,
                                    total);
    }
    if (options_.access_log) {
      std::fprintf(stderr,
                   "flotilla-coordinator: request id=%s api=%s model=%s "
                   "status=%d prompt_tokens=%zu completion_tokens=%zu "
                   "ttft_s=%.3f total_s=%.3f\n",
                   ctx.id.empty() ? "-" : ctx.id.c_str(), ctx.api.c_str(),
                   options_.model_name.c_str(), status, prompt, generated, ttft,
                   total);
    }
  });
  // An unknown /v1 route needs the key first (its name is not public).
  s.SetNotFound([this](const http::HttpRequest& req, http::HttpResponse* res) {
    if (absl::StartsWith(req.path, "/v1/") && !Admit(req, res)) return;
    Error(res, 404, absl::StrCat("no route ", req.method, " ", req.path));
  });
  s.Route(
      "GET", "/",
      [](const http::HttpRequest&, http::HttpResponse* res) {
        res->Set(200, "text/html; charset=utf-8", ChatPageHtml());
      },
      /*any_origin=*/true);
  s.Route("GET", "/healthz",
          [](const http::HttpRequest&, http::HttpResponse* res) {
            res->Set(200, "text/plain", "ok\n");
          });
  s.Route("GET", "/readyz",
          [this](const http::HttpRequest&, http::HttpResponse* res) {
            const std::string missing =
                options_.missing_experts ? options_.missing_experts() : "";
            const bool ready = !draining_ && missing.empty();
            json body = {{"ready", ready},
                         {"waiting", queue_->waiting()},
                         {"max_queue", options_.max_queue}};
            if (!missing.empty()) body["missing_experts"] = missing;
            res->Set(ready ? 200 : 503, "application/json", Dump(body));
          });
  const json model = {{"id", options_.model_name},
                      {"object", "model"},
                      {"created", 0},
                      {"owned_by", "flotilla"},
                      {"max_model_len", options_.limits.max_context}};
  s.Route("GET", "/v1/models",
          [this, model](const http::HttpRequest& req, http::HttpResponse* res) {
            if (!Admit(req, res)) return;
            res->Set(200, "application/json",
                     Dump({{"object", "list"}, {"data", {model}}}));
          });
  s.Route("GET", "/v1/models/*",
          [this, model](const http::HttpRequest& req, http::HttpResponse* res) {
            if (!Admit(req, res)) return;
            const std::string id = req.path.substr(sizeof("/v1/models/") - 1);
            if (id != options_.model_name) {
              return Error(res, 404,
                           absl::StrCat("model '", id,
                                        "' is not served here (this server "
                                        "serves '",
                                        options_.model_name, "')"));
            }
            res->Set(200, "application/json", Dump(model));
          });
  s.Route("POST", "/v1/completions",
          [this](const http::HttpRequest& req, http::HttpResponse* res) {
            Complete(req, res, /*chat=*/false);
          });
  s.Route("POST", "/v1/chat/completions",
          [this](const http::HttpRequest& req, http::HttpResponse* res) {
            Complete(req, res, /*chat=*/true);
          });
  s.Route("POST", "/v1/messages",
          [this](const http::HttpRequest& req, http::HttpResponse* res) {
            Messages(req, res);
          });
  s.Route("POST", "/v1/responses",
          [this](const http::HttpRequest& req, http::HttpResponse* res) {
            Responses(req, res);
          });
  s.Route("POST", "/v1/messages/count_tokens",
          [this](const http::HttpRequest& req, http::HttpResponse* res) {
            CountTokens(req, res);
          });
  s.Route("POST", "/tokenize",
          [this](const http::HttpRequest& req, http::HttpResponse* res) {
            Tokenize(req, res);
          });
  s.Route("POST", "/detokenize",
          [this](const http::HttpRequest& req, http::HttpResponse* res) {
            Detokenize(req, res);
          });
}

const ChatFormat& HttpServer::chat_format() const {
  static const ChatFormat* const kPlain =
      new ChatFormat(ChatFormat::BuiltIn(ChatTemplate::kPlain));
  return options_.chat_format != nullptr ? *options_.chat_format : *kPlain;
}

absl::StatusOr<std::shared_ptr<const constrained::TokenPieces>>
HttpServer::Pieces() {
  std::lock_guard<std::mutex> lock(pieces_mu_);
  if (pieces_ == nullptr) {
    if (tokenizer_ == nullptr) {
      return absl::InvalidArgumentError(
          "constrained output needs the model's tokenizer");
    }
    absl::StatusOr<std::shared_ptr<const constrained::TokenPieces>> built =
        constrained::TokenPieces::Build(*tokenizer_);
    if (!built.ok()) return built.status();
    pieces_ = *std::move(built);
  }
  return pieces_;
}

}  // namespace flotilla::coordinator::serve
