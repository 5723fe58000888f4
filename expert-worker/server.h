// The worker's gRPC front: ExpertService (callback API) plus the standard
// health and reflection services. gRPC stays behind this header so that the
// rest of the worker (and its tests) compile without gRPC headers.
#ifndef FLOTILLA_EXPERT_WORKER_SERVER_H_
#define FLOTILLA_EXPERT_WORKER_SERVER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "expert-worker/shard_plan.h"

namespace flotilla::expert_worker {

// Reported in InfoResponse.worker_version.
inline constexpr char kWorkerVersion[] = "flotilla-expert-worker 0.1.0-dev";

// Largest request or response message, in bytes. A step's Compute carries
// rows x latent width floats (14 KiB per row for K3), so this admits
// thousands of rows; the coordinator splits above it (Info reports it).
inline constexpr uint64_t kMaxMessageBytes = uint64_t{64} << 20;

struct ServeOptions {
  std::string host = "0.0.0.0";  // address to bind
  int port = 0;                  // 0 = any free port (printed at start)
};

// Serves `plan` until SIGINT or SIGTERM arrives, then stops accepting calls,
// marks health NOT_SERVING, drains in-flight calls (bounded wait) and
// returns OK. Prints "listening on HOST:PORT" to stdout once serving.
// Must be called before any other thread exists: it blocks SIGINT/SIGTERM
// in the calling thread so every thread gRPC starts inherits the mask and
// the signals can only be taken by sigwait here.
absl::Status ServeUntilSignal(const ShardPlan& plan,
                              const ServeOptions& options);

}  // namespace flotilla::expert_worker

#endif  // FLOTILLA_EXPERT_WORKER_SERVER_H_
