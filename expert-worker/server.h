// The worker's gRPC front: ExpertService (callback API) plus the standard
// health and reflection services, optionally over TLS / mutual TLS. gRPC
// stays behind this header so that the rest of the worker (and its tests)
// compile without gRPC headers.
//
// Threading: one compute thread runs the calls in arrival order on the
// ExpertCompute (reads with O_DIRECT at high queue depth, expert kernels on
// its own thread pool). gRPC's callback threads only parse, validate
// (cheap, bounded) and queue calls for it (expert_service.h), so no gRPC
// thread ever blocks on disk or compute: Info / health stay responsive
// while a large call runs, and Prefetch hints are validated on a gRPC
// thread and run on the compute thread (they only start reads).
//
// Memory: each Compute is charged to the worker's --mem ledger on arrival
// (ExpertCompute::CallBytes plus its request) until its response has been
// handed to gRPC; a call that does not fit is RESOURCE_EXHAUSTED.
#ifndef FLOTILLA_EXPERT_WORKER_SERVER_H_
#define FLOTILLA_EXPERT_WORKER_SERVER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "expert-worker/expert_compute.h"
#include "expert-worker/shard_plan.h"
#include "shared/transport/tls_options.h"

namespace flotilla::expert_worker {

// Reported in InfoResponse.worker_version.
inline constexpr char kWorkerVersion[] = "flotilla-expert-worker 0.2.0";

// Largest request or response message, in bytes. A step's Compute carries
// rows x latent width floats (14 KiB per row for K3), so this admits
// thousands of rows; the coordinator splits above it (Info reports it).
inline constexpr uint64_t kMaxMessageBytes = uint64_t{64} << 20;

// Calls waiting for the compute thread before new ones get
// RESOURCE_EXHAUSTED. A coordinator has one call per layer in flight, so
// this only bounds memory against misbehaving clients.
inline constexpr int kMaxQueuedCalls = 64;

struct ServeOptions {
  std::string host = "0.0.0.0";  // address to bind
  int port = 0;                  // 0 = any free port (printed at start)
  transport::TlsFiles tls;       // empty: plaintext; ca set: mutual TLS
  // Prometheus metrics at http://host:PORT/metrics (0 = any free port,
  // -1 = off); printed at start.
  int metrics_port = -1;
};

// Blocks SIGINT and SIGTERM in the calling thread. Call it first in main,
// before any thread exists (the compute pool, the fetcher's readers, gRPC's
// threads all inherit the mask), so that only ServeUntilSignal's sigwait
// takes them: shutting down in a signal handler is not an option, since
// grpc::Server::Shutdown is not async-signal-safe.
absl::Status BlockShutdownSignals();

// Serves `compute` until SIGINT or SIGTERM arrives (BlockShutdownSignals
// must have run), then marks health NOT_SERVING, stops accepting calls,
// drains in-flight calls (bounded wait) and returns OK. Prints "listening
// on HOST:PORT" to stdout once serving.
absl::Status ServeUntilSignal(ExpertCompute* compute,
                              const ServeOptions& options);

}  // namespace flotilla::expert_worker

#endif  // FLOTILLA_EXPERT_WORKER_SERVER_H_
