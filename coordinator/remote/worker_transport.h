// How RemoteExperts talks to its workers: an interface, so that the dealing,
// retry and combine logic runs in unit tests against a fake fleet
// (remote_experts_test.cc) and in production over gRPC (grpc_transport.h).
// Messages are the wire contract's (proto/flotilla/v1/expert.proto); no gRPC
// type appears here.
//
// Thread-compatibility: one thread at a time (the forward pass's).
#ifndef FLOTILLA_COORDINATOR_REMOTE_WORKER_TRANSPORT_H_
#define FLOTILLA_COORDINATOR_REMOTE_WORKER_TRANSPORT_H_

#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "flotilla/v1/expert.pb.h"

namespace flotilla::coordinator {

using RemoteClock = std::chrono::steady_clock;

// One Compute call: the caller fills worker and request; the transport
// fills the rest by the AwaitComputes after its StartCompute.
struct ComputeCall {
  int worker = 0;
  v1::ComputeRequest request;
  absl::Status status;  // the call's outcome, the worker's error verbatim
  v1::ComputeResponse response;
  RemoteClock::time_point sent, answered;
};

// What the Prefetch hints sent so far have come to.
struct PrefetchTally {
  uint64_t failed = 0;     // errors and deadlines
  uint64_t scheduled = 0;  // experts the workers started reading
  size_t in_flight = 0;    // sent, not answered yet
};

class WorkerTransport {
 public:
  virtual ~WorkerTransport() = default;

  // Info of every worker, asked all at once, each within `deadline_ms`.
  // Fail-fast unless `wait_for_ready`: then a worker that is not up yet
  // (refused) may take the whole deadline to come up. A worker that did
  // not answer gets the connection's own error (refused, TLS handshake
  // failed...), not only "deadline exceeded".
  virtual std::vector<absl::StatusOr<v1::InfoResponse>> InfoAll(
      int deadline_ms, bool wait_for_ready) = 0;
  // One Info of worker `w` that fails at once when it is unreachable:
  // probing a worker that was down.
  virtual absl::StatusOr<v1::InfoResponse> Info(int w, int deadline_ms) = 0;

  // Sends `call` now, with `deadline_ms`; `call` must stay valid until the
  // next AwaitComputes returns. Calls started together are in flight
  // together: a layer's first worker starts while the next request is
  // being built.
  virtual void StartCompute(ComputeCall* call, int deadline_ms) = 0;
  // Returns when every started call has completed: OK, the worker's error,
  // or DEADLINE_EXCEEDED (each carries its deadline, so this ends). Hint
  // answers that arrive meanwhile are tallied.
  virtual void AwaitComputes() = 0;

  // Sends a hint and returns at once; it is never waited for.
  virtual void SendPrefetch(int w, const v1::PrefetchRequest& request,
                            int deadline_ms) = 0;
  // The hints' answers read so far (reads those already in, never waits).
  virtual PrefetchTally Prefetches() = 0;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_REMOTE_WORKER_TRANSPORT_H_
