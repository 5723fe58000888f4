// Internal to RemoteExperts (remote_experts.cc: connecting, worker health,
// stats; remote_experts_layer.cc: one layer's calls, built, sent, awaited
// and combined; remote_experts_split.cc: split fleets;
// remote_experts_deal.cc: choosing holders and Prefetch hints). No gRPC:
// the workers are reached through a WorkerTransport.
#ifndef FLOTILLA_COORDINATOR_REMOTE_REMOTE_EXPERTS_INTERNAL_H_
#define FLOTILLA_COORDINATOR_REMOTE_REMOTE_EXPERTS_INTERNAL_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/remote/remote_experts.h"
#include "coordinator/remote/worker_transport.h"

namespace flotilla::coordinator {

// A worker's request size limit (4 MiB, gRPC's default, when it names none).
uint64_t MaxRequestBytes(const v1::InfoResponse& info);

// One worker and what the coordinator knows of it.
struct WorkerConn {
  int index = 0;          // position in RemoteExpertsOptions::workers
  std::string address;    // host:port
  v1::InfoResponse info;  // from Connect (shard, ownership, limits)
  // False for a worker that did not answer at connect while the others
  // held every expert: it holds nothing until a probe gets its Info.
  bool has_info = true;
  // Health, under Impl::calls_mu (the forward pass and the health thread).
  bool down = false;
  RemoteClock::time_point down_since;
  RemoteClock::time_point retry_at;  // probe again from here on
  std::string last_error;

  // "worker 1 (127.0.0.1:7001)", for messages.
  std::string Name() const;
};

// One call of a layer over whole experts: part (or all) of one worker's
// share of the tasks.
struct LayerCall {
  ComputeCall rpc;
  std::vector<int> tasks;  // indices into the layer's tasks, in task order
  std::vector<int> rows;   // global rows, ascending; request row k = rows[k]
  bool ok = false;         // succeeded and passed CheckLayerResponse
};

// Where the calls of one layer put each task, for the combine.
struct TaskPlacement {
  std::vector<int> call;  // task i -> its call in the layer's list
  std::vector<int> pos;   // task i -> its position among that call's tasks
};

// Builds one round's calls of a layer over whole experts (worker by worker,
// each worker's tasks in task order, split by rows when a message would pass
// `payload_budget` bytes of floats), appending to `calls` and recording
// every dealt task's place. `chosen[e]` is expert e's worker or -1 (not in
// this round). Pure: no I/O.
void BuildLayerCalls(int layer, uint64_t step_id, const float* z, int rows,
                     size_t width, bool row_sums,
                     const std::vector<ExpertTask>& tasks,
                     const std::vector<int>& chosen, int num_workers,
                     uint64_t payload_budget,
                     std::vector<std::unique_ptr<LayerCall>>* calls,
                     TaskPlacement* placement);

// Checks an answer against its call (never trust the network).
absl::Status CheckLayerResponse(const LayerCall& c, size_t width,
                                bool row_sums);

// out[rows][width] from the successful calls: expert outputs combined in
// task order (combine.h, bitwise LocalExperts'), or the workers' double row
// sums added call by call in creation order. Pure.
void CombineLayer(const std::vector<ExpertTask>& tasks, int rows, size_t width,
                  bool row_sums,
                  const std::vector<std::unique_ptr<LayerCall>>& calls,
                  const TaskPlacement& placement, float* out);

struct RemoteExperts::Impl {
  model::MoeSpec config;
  RemoteExpertsOptions options;
  const base::Clock* clock = base::Clock::Real();  // options.clock or real
  std::unique_ptr<WorkerTransport> transport;
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
  // hinted[layer][expert]: the worker the layer's last Prefetch hint sent
  // the expert to, or -1; ComputeLayer prefers it, then forgets the layer.
  std::vector<std::vector<int>> hinted;

  // Connect's checks, once every worker's Info is in `workers`: each
  // worker's Info (CheckInfo), the split fleet (CheckSplitFleet), and that
  // together they hold every (layer, expert).
  absl::Status CheckFleet();
  // Checks a worker's Info against the coordinator's model: fingerprint
  // (naming both), shape, and that owned experts are real MoE pairs.
  absl::Status CheckInfo(const WorkerConn& worker,
                         const v1::InfoResponse& info) const;
  // A layer's checksums in a worker's Info against expected_checksums
  // (when both exist): the content check under an equal fingerprint.
  absl::Status CheckChecksums(const WorkerConn& worker, uint32_t layer,
                              const v1::ExpertList& list) const;
  // Probes the workers that never answered (has_info false) whose backoff
  // has passed; one that answers and passes CheckInfo joins the holders.
  void ProbeAbsent();
  // Recomputes `missing` when the set of down workers changed since the
  // last call (cheap otherwise: one pass over the workers).
  void UpdateMissing();
  std::vector<bool> missing_for_down;  // the down set `missing` is for
  mutable std::mutex missing_mu;
  std::string missing;  // guarded by missing_mu
  // Whether the workers that answered (`infos`, ok entries) hold every
  // expert; else what is missing, for the error.
  bool AnswersCover(
      const std::vector<absl::StatusOr<v1::InfoResponse>>& infos) const;
  std::string MissingWithout(
      const std::vector<absl::StatusOr<v1::InfoResponse>>& infos) const;
  // Info from worker w, fail-fast within `deadline_ms`, counted in its
  // stats and checked with CheckInfo (CheckedInfo: the part after the call,
  // for probes made without calls_mu).
  absl::StatusOr<v1::InfoResponse> ProbeInfo(int w, int deadline_ms);
  absl::StatusOr<v1::InfoResponse> CheckedInfo(
      int w, absl::StatusOr<v1::InfoResponse> answer, double seconds);
  // What a probe's answer makes of worker w: an absent worker joins the
  // holders, a down one comes back if it owns what it owned, an up one
  // that failed is marked down. Returns whether w is usable now.
  bool Admit(int w, const absl::StatusOr<v1::InfoResponse>& info);
  // Whether `w` may be used now. A down worker whose backoff has passed is
  // probed (Info, fail-fast, deadline) and must show the same fingerprint
  // and ownership as at connect to come back.
  bool Usable(int w);
  void MarkDown(int w, const std::string& error);

  absl::Status ComputeLayer(int layer, const float* z, int rows,
                            const std::vector<ExpertTask>& tasks, float* out);
  // The calls of one round are answered: failed workers are marked down
  // and their experts flagged in `retry` (per expert); counters updated.
  // An INVALID_ARGUMENT answer is a disagreement about the request, not a
  // dead worker: it fails the layer (Internal) instead of hiding it.
  absl::Status CollectRound(
      int layer, size_t width,
      const std::vector<std::unique_ptr<LayerCall>>& calls, size_t first,
      std::vector<bool>* failed, std::vector<bool>* retry,
      double* slowest_worker, double* slowest_rpc,
      std::vector<uint64_t>* worker_bytes);
  // UNAVAILABLE for a layer whose `unserved` experts have no live holder,
  // naming them and the missing workers with their last errors.
  absl::Status Unserved(int layer, const std::vector<int>& unserved) const;

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
  // stats with the hint answers read so far folded in.
  RemoteStats Snapshot();

  // The forward pass (ComputeLayer, PrefetchLayer, stats) and the health
  // thread take turns on everything above.
  mutable std::mutex calls_mu;
  RemoteClock::time_point last_layer_at;  // end of the last ComputeLayer
  // Probes (without calls_mu held while waiting for answers) the absent
  // and down workers whose backoff has passed, and the up ones when no
  // layer ran for options.health_interval_ms; then UpdateMissing.
  void CheckWorkers();
  // options.health_interval_ms > 0: CheckWorkers every interval.
  void StartHealthThread();
  void StopHealthThread();
  std::thread health_thread;
  std::mutex health_mu;
  std::condition_variable health_cv;
  bool health_stop = false;  // guarded by health_mu
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_REMOTE_REMOTE_EXPERTS_INTERNAL_H_
