// What http_server.cc and completion_handler.cc share: the per-request
// context the access log reads, and the JSON error answers.
#ifndef FLOTILLA_COORDINATOR_SERVE_HTTP_INTERNAL_H_
#define FLOTILLA_COORDINATOR_SERVE_HTTP_INTERNAL_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "coordinator/serve/completion_job.h"
#include "nlohmann/json.hpp"
#include "shared/http/http_service.h"

namespace flotilla::coordinator::serve::internal {

// The request a connection thread is on: the service runs a request's
// handler, its streamed body and the logger on one thread, so the logger
// finds here what the handler learned.
struct RequestContext {
  absl::Time start;
  std::string api;  // "completions" or "chat"; empty: not a completion
  std::string id;
  std::shared_ptr<Completion> completion;
};
RequestContext& CurrentRequest();

std::string Dump(const nlohmann::json& j);
int64_t UnixNow();

void Error(http::HttpResponse* res, int status, const std::string& message);
// A request that ran and failed: 504 when its time ran out, 503 when the
// server cannot run it now (an expert without a live worker, shutting
// down: worth a retry), else 500.
void Failed(http::HttpResponse* res, const absl::Status& status);
// The HTTP status of that failure (504, 503 or 500).
int FailedStatus(const absl::Status& status);

}  // namespace flotilla::coordinator::serve::internal

#endif  // FLOTILLA_COORDINATOR_SERVE_HTTP_INTERNAL_H_
