// `flotilla-coordinator serve`: an OpenAI-compatible HTTP API over one
// model opened once (on shared/http's HttpService). Routes:
//   POST /v1/completions        prompt as text, [text] or token ids
//   POST /v1/chat/completions   messages rendered with the chat template
//        both with "stream": true as server-sent events ending in
//        "data: [DONE]", usage in every response (and in a last chunk with
//        stream_options.include_usage)
//   GET  /v1/models, /v1/models/{id}, /healthz, /readyz
//   POST /tokenize, /detokenize  (vLLM's shapes)
//   GET  /                      the web chat page (chat_page.h)
// Every completion response carries its id in X-Request-Id (the body's
// "id"), and is counted in the metrics and the access log when it ends (as
// 499 when the client went away before its end).
// Errors are OpenAI-style bodies ({"error": {"message", "type", ...}}) with
// 400 (bad request), 401 (API key, also for unknown /v1 routes), 404
// (unknown model or route), 405 (method), 408/413/415/431 (the request
// itself, shared/http), 429 (queue full, Retry-After), 500 (the model
// failed), 503 (draining, connections full).
//
// Requests run in the shared GenerationQueue (continuous batching, up to
// --max-batch at once); waiting ones queue up to --max-queue.
#ifndef FLOTILLA_COORDINATOR_SERVE_HTTP_SERVER_H_
#define FLOTILLA_COORDINATOR_SERVE_HTTP_SERVER_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/model/language_model.h"
#include "coordinator/constrained/token_constraint.h"
#include "coordinator/serve/chat_format.h"
#include "coordinator/serve/chat_output.h"
#include "coordinator/serve/completion_job.h"
#include "coordinator/serve/completion_request.h"
#include "coordinator/serve/generation_queue.h"
#include "coordinator/serve/serve_metrics.h"
#include "shared/http/http_service.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::coordinator::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;         // 0: any free port (see HttpServer::port)
  std::string model_name;  // the id /v1/models lists and every reply names
  // Refuse (404) a request that names another model; by default any name is
  // answered by the one model served (clients send their own defaults).
  bool strict_model_name = false;
  std::string api_key;     // empty: no authentication
  // How chat messages become a prompt and replies are read back (null:
  // the plain built-in template).
  std::shared_ptr<const ChatFormat> chat_format;
  RequestLimits limits;
  size_t max_queue = 64;  // for /readyz (the queue enforces it)
  size_t max_batch = 8;
  // Open HTTP connections at most (each holds a thread); past it 503.
  int max_connections = 512;
  // Set: CORS for this origin ("*": any), as --cors-origin.
  std::string cors_origin;
  ServeMetrics* metrics = nullptr;  // may be null; must outlive the server
  // One line per completion request on stderr: request id, API, model,
  // status, prompt and completion tokens, time to first token, total time.
  bool access_log = true;
  // With expert workers: the (layer, expert) ranges no live worker holds
  // (RemoteExperts::MissingExperts; empty: all held). While not empty
  // /readyz answers 503 naming them. Unset: no expert workers.
  std::function<std::string()> missing_experts;
};

class HttpServer {
 public:
  // `model`, `tokenizer` (may be null: prompts as ids only) and `queue`
  // (which runs the requests, shared with the gRPC service) must outlive
  // the server.
  HttpServer(LanguageModel* model, const tokenizer::Tokenizer* tokenizer,
             GenerationQueue* queue, ServeOptions options);
  ~HttpServer();

  // Binds and serves on a background thread. Errors name the address.
  absl::Status Start();
  int port() const { return server_->port(); }
  // Graceful drain: new completion requests get 503 (and /readyz turns
  // 503) while the ones already accepted run to their end. Returns true
  // when they all ended within `timeout`.
  bool Drain(absl::Duration timeout);
  // Stops accepting connections and waits for the open ones.
  void Stop();

 private:
  void Routes();
  // Whether an API request may go on: false after answering 401 (a missing
  // or wrong key with --api-key-file) or 503 (a POST while draining).
  bool Admit(const http::HttpRequest& req, http::HttpResponse* res) const;
  void Complete(const http::HttpRequest& req, http::HttpResponse* res,
                bool chat);
  // POST /v1/messages (Anthropic's Messages API) and its count_tokens.
  void Messages(const http::HttpRequest& req, http::HttpResponse* res);
  void CountTokens(const http::HttpRequest& req, http::HttpResponse* res);
  // POST /v1/responses (OpenAI's Responses API; responses_handler.cc).
  void Responses(const http::HttpRequest& req, http::HttpResponse* res);
  // Admit for the Anthropic routes: x-api-key (or Bearer), Anthropic errors.
  bool AdmitAnthropic(const http::HttpRequest& req,
                      http::HttpResponse* res) const;
  // A parsed request made into a queued Completion (completion_start.cc);
  // on failure `*refusal` holds the HTTP status to answer (400, 404, 429,
  // 503) and the status its message.
  absl::StatusOr<std::shared_ptr<Completion>> StartCompletion(
      const CompletionRequest& req, bool chat, ChatOutputOptions* output,
      int* refusal);
  // What every generating route does first: StartCompletion, then holds
  // the server's in-flight count, names the request (`id_prefix`, a
  // number; X-Request-Id and the access log). A refusal sets Retry-After
  // when worth a retry (429, 503); the route answers it in its own shape.
  struct Started {
    std::shared_ptr<Completion> completion;
    std::shared_ptr<void> in_flight;
    std::string id;
  };
  absl::StatusOr<Started> Begin(const CompletionRequest& req, bool chat,
                                absl::string_view id_prefix,
                                ChatOutputOptions* output, int* refusal,
                                http::HttpResponse* res);
  void Tokenize(const http::HttpRequest& req, http::HttpResponse* res) const;
  void Detokenize(const http::HttpRequest& req, http::HttpResponse* res) const;
  // Held by each accepted completion until its response is written (the
  // streaming callbacks keep a copy); Drain waits for none to be held.
  std::shared_ptr<void> InFlight();
  const ChatFormat& chat_format() const;
  // Each token's text for constrained decoding, built at the first request
  // that needs it.
  absl::StatusOr<std::shared_ptr<const constrained::TokenPieces>> Pieces();

  LanguageModel* model_;
  const tokenizer::Tokenizer* tokenizer_;
  ServeOptions options_;
  std::unique_ptr<http::HttpService> server_;
  GenerationQueue* queue_;
  std::atomic<bool> draining_{false};
  std::mutex in_flight_mu_;
  std::condition_variable in_flight_cv_;
  int in_flight_ = 0;  // guarded by in_flight_mu_
  std::mutex pieces_mu_;
  std::shared_ptr<const constrained::TokenPieces> pieces_;  // pieces_mu_
};

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_HTTP_SERVER_H_
