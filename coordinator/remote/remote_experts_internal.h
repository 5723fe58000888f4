// Internal to RemoteExperts (remote_experts.cc: connecting, worker health,
// stats; remote_experts_layer.cc: one layer's calls and the combine;
// remote_experts_deal.cc: choosing holders and Prefetch hints).
// Includes gRPC: never include it from another header.
#ifndef FLOTILLA_COORDINATOR_REMOTE_REMOTE_EXPERTS_INTERNAL_H_
#define FLOTILLA_COORDINATOR_REMOTE_REMOTE_EXPERTS_INTERNAL_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/remote/remote_experts.h"
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

// What a tag on Impl::cq points at: a Compute call of the layer in
// progress, or a Prefetch hint (which may complete during a later layer).
struct CqTag {
  bool prefetch = false;
};

// A Compute call of the layer in progress (either layer path): when it was
// sent and when its answer was read off `cq`.
struct ComputeTag : CqTag {
  RemoteClock::time_point sent, answered;
};

// One Prefetch hint in flight; owned by Impl::prefetch_in_flight.
struct PrefetchCall : CqTag {
  grpc::ClientContext context;
  v1::PrefetchRequest request;
  v1::PrefetchResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::PrefetchResponse>> reader;
};

struct RemoteExperts::Impl {
  model::K3Config config;
  RemoteExpertsOptions options;
  std::vector<WorkerConn> workers;
  // holders[layer][expert]: indices of the workers holding it, ascending.
  std::vector<std::vector<std::vector<int>>> holders;
  // Smallest max_request_bytes over the workers.
  uint64_t max_message_bytes = 0;
  // Float/double payload one call may carry: the smaller of
  // options.max_call_bytes (when set) and max_message_bytes, less room
  // for the rest of the message.
  uint64_t CallPayloadBudget() const;
  uint64_t step = 0;  // ComputeRequest.step_id of the next layer call
  RemoteStats stats;
  ExpertBackendStats backend;
  // Every call completes here (Connect's Info, the layer's Compute calls,
  // Prefetch hints), polled only by the forward-pass thread: it is then
  // the thread that reads the answers, with no hand-off from another (the
  // callback API would start gRPC's "nexting" threads, which poll instead
  // and wake the forward pass once per answer).
  grpc::CompletionQueue cq;
  // hinted[layer][expert]: the worker the layer's last Prefetch hint sent
  // the expert to, or -1; ComputeLayer prefers it, then forgets the layer.
  std::vector<std::vector<int>> hinted;

  // Hints in flight (their answers are read off `cq` whenever the forward
  // pass polls it), and what came back.
  std::map<PrefetchCall*, std::unique_ptr<PrefetchCall>> prefetch_in_flight;
  uint64_t prefetch_failed = 0;
  uint64_t prefetch_scheduled = 0;

  ~Impl() {
    CancelPrefetches();
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
  // Reads `count` Compute answers off `cq` (every call has a deadline, so
  // every one completes: OK, error or DEADLINE_EXCEEDED), stamping each
  // ComputeTag's `answered`; hint answers met on the way are counted, not
  // waited for. This thread reads the answers itself: no hand-off from a
  // gRPC thread.
  absl::Status AwaitComputeCalls(size_t count);

  // Split fleets (remote_experts_split.cc). Set by CheckSplitFleet when
  // every worker holds a row slice of every expert.
  bool is_split = false;
  // After every worker's Info passed CheckInfo: OK for a fleet of whole
  // experts; for a split fleet, checks that the slices tile both matrix
  // dimensions once and sets is_split.
  absl::Status CheckSplitFleet();
  // A layer's tasks through the two slice rounds, then the combine.
  absl::Status ComputeSplitLayer(int layer, const float* z, int rows,
                                 const std::vector<ExpertTask>& tasks,
                                 float* out);
  // What a layer's rounds add up, for RemoteStats.
  struct LayerTotals {
    double slowest_worker = 0, slowest_rpc = 0;  // summed over rounds
    std::vector<uint64_t> worker_bytes;          // per worker
  };
  // One round: every worker gets every task (chunked by the message
  // limit); task i's input row is in + in_row[i] * in_width (in holds
  // num_in_rows rows). Worker slices land at their offsets in
  // assembled[i][out_width] (gate/up: intermediate rows; down: latent rows).
  absl::Status RunSliceRound(int layer, bool down, const float* in,
                             size_t num_in_rows, size_t in_width,
                             const std::vector<int>& in_row,
                             const std::vector<ExpertTask>& tasks,
                             float* assembled, size_t out_width,
                             LayerTotals* totals);
  // Per-task activations [tasks][I] and outputs [tasks][L], reused.
  std::vector<float> act_scratch, out_scratch;

  // Deals `experts` (ascending, distinct) of `layer` over their holders for
  // which usable(w) holds, rotated so that ties spread over the fleet and,
  // when `prefer_hinted`, with the hinted holder first. chosen[e] gets the
  // worker (size num_experts, -1 elsewhere); experts without a usable
  // holder go to `unserved`.
  void DealLayer(int layer, const std::vector<int>& experts,
                 const std::function<bool(int)>& usable, bool prefer_hinted,
                 std::vector<int>* chosen, std::vector<int>* unserved) const;
  absl::Status PrefetchLayer(int layer, const std::vector<int>& experts);
  // Counts a finished hint and frees it.
  void OnPrefetchDone(PrefetchCall* call);
  // Reads the hint answers that are already in `cq`, without waiting.
  void DrainReadyPrefetches();
  // Cancels the hints in flight and reads every answer.
  void CancelPrefetches();
  // stats with the hint answers read so far folded in.
  RemoteStats Snapshot();
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_REMOTE_REMOTE_EXPERTS_INTERNAL_H_
