// Internal to RemoteExperts (remote_experts.cc: connecting, worker health,
// stats; remote_experts_layer.cc: one layer's calls and the combine).
// Includes gRPC: never include it from another header.
#ifndef FLOTILLA_COORDINATOR_REMOTE_EXPERTS_INTERNAL_H_
#define FLOTILLA_COORDINATOR_REMOTE_EXPERTS_INTERNAL_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/remote_experts.h"
#include "shared/transport/transport.h"

namespace flotilla::coordinator {

using RemoteClock = std::chrono::steady_clock;

// One worker: its channel (created once, reused for every call) and state.
struct WorkerConn {
  int index = 0;        // position in RemoteExpertsOptions::workers
  std::string address;  // host:port
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::ExpertService::Stub> stub;
  v1::InfoResponse info;  // from Connect (shard, ownership, limits)
  // Health, touched only by the forward-pass thread.
  bool down = false;
  RemoteClock::time_point down_since;
  RemoteClock::time_point retry_at;  // probe again from here on
  std::string last_error;

  // "worker 1 (127.0.0.1:7001)", for messages.
  std::string Name() const;
};

struct RemoteExperts::Impl {
  model::K3Config config;
  RemoteExpertsOptions options;
  std::vector<WorkerConn> workers;
  // holders[layer][expert]: indices of the workers holding it, ascending.
  std::vector<std::vector<std::vector<int>>> holders;
  // Smallest max_request_bytes over the workers.
  uint64_t max_message_bytes = 0;
  uint64_t step = 0;  // ComputeRequest.step_id of the next layer call
  RemoteStats stats;
  ExpertBackendStats backend;
  // Compute calls of the layer in progress complete here; polled by the
  // forward-pass thread (empty between layers).
  grpc::CompletionQueue cq;

  ~Impl() {
    cq.Shutdown();
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
    }
  }

  // Checks a worker's Info against the coordinator's model: fingerprint
  // (naming both), shape, and that owned experts are real MoE pairs.
  absl::Status CheckInfo(const WorkerConn& worker,
                         const v1::InfoResponse& info) const;
  // Whether `w` may be used now. A down worker whose backoff has passed is
  // probed (Info, fail-fast, deadline) and must show the same fingerprint
  // and ownership as at connect to come back.
  bool Usable(int w);
  void MarkDown(int w, const std::string& error);

  absl::Status ComputeLayer(int layer, const float* z, int rows,
                            const std::vector<ExpertTask>& tasks, float* out);
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_REMOTE_EXPERTS_INTERNAL_H_
