// RemoteExperts: the ExpertBackend that sends each MoE layer's routed
// experts to expert workers over gRPC (flotilla.v1.ExpertService).
//
// Per ComputeLayer (one MoE layer of one forward step): every distinct
// expert the step routed to is given to one worker that holds it; each
// worker gets ONE Compute call carrying every (row, expert, weight) task of
// the step that it serves and the activations of just those rows (split only
// when a message would pass the worker's max_request_bytes). All calls are
// sent at once (async) with a deadline each; the layer waits for all.
//
// Choosing holders: with replicas (R > 1) an expert has several holders;
// the layer's distinct experts are dealt so that the busiest worker gets as
// few experts as possible (a b-matching by augmenting paths; deterministic),
// since the layer waits for its slowest disk (with R = 1 the busiest of N
// random shares bounds a layer; figures in bench/distributed/README.md).
// With R = 1 the placement decides alone.
//
// Failures: a call that fails (connection lost, deadline, worker error
// other than INVALID_ARGUMENT) marks its worker down and its experts are
// re-dealt among their other holders in a new round; a layer fails when some
// expert has no live holder left, with UNAVAILABLE naming the layer, the
// experts, the missing worker(s) and their last error. A down worker is
// skipped for retry_backoff_ms, then probed with Info (fingerprint and
// ownership re-checked) before it is used again, so a restarted worker is
// picked up without restarting the coordinator.
//
// Determinism (docs/architecture.md), by OutputKind
// (proto/flotilla/v1/expert.proto):
//  * default (row_sums = false): workers return each task's unweighted
//    expert output; the coordinator sums weight * output per row in TASK
//    ORDER in double and rounds once, exactly as LocalExperts does. Results
//    are bitwise identical to the single-process run whatever the worker
//    count, placement, replica chosen or retry.
//  * row_sums = true: workers return per-row double partial sums (their
//    tasks in task order); the coordinator adds the partials in fixed order
//    (retry round, then worker index in --workers, then split chunk) and
//    rounds once. Equal to single-process up to double rounding: same token
//    ids, logits within 1e-6 (tested), fewer bytes when a row has more than
//    two experts on one worker.
//
// Prefetch hints (PrefetchLayer, --expert-prefetch): the layer's predicted
// experts are dealt exactly as ComputeLayer deals them (same holders, same
// balancing; workers currently down are skipped, never probed) and each
// chosen worker gets one Prefetch RPC, sent asynchronously with a short
// deadline: the forward pass never waits for it, and a hint that fails is
// counted (RemoteStats), never retried and never an error of the step. The
// next ComputeLayer of that layer prefers, among equally balanced deals,
// the holder each expert was hinted to, so the read it started is used
// (ComputeStats.prefetch_hits, summed in backend_stats().prefetch_hits).
// Hints never change results.
//
// Split fleets (every worker holds a row slice of every expert, Info.split;
// remote_experts_split.cc): each layer is two rounds of one call per
// worker, gate/up slices then the down projection of the assembled
// activations; bitwise identical to single-process, no replicas.
//
// At connect, every worker's Info must show the coordinator's checkpoint
// fingerprint (else FailedPrecondition naming both fingerprints), the
// model's shape, and together the workers must hold every (layer, expert).
//
// The workers are reached through a WorkerTransport (worker_transport.h):
// gRPC in production (grpc_transport.h), a fake fleet in the unit tests.
//
// Thread-compatibility: one call at a time (ComputeLayer, PrefetchLayer,
// remote_stats: the forward pass's thread, which alone reads the answers).
// Keeps gRPC out of this header (pimpl).
#ifndef FLOTILLA_COORDINATOR_REMOTE_REMOTE_EXPERTS_H_
#define FLOTILLA_COORDINATOR_REMOTE_REMOTE_EXPERTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model/expert_backend.h"
#include "shared/base/clock.h"
#include "shared/base/latency_counts.h"
#include "shared/model/moe_spec.h"
#include "shared/transport/tls_options.h"

namespace flotilla::coordinator {

struct RemoteExpertsOptions {
  // "host:port" of every worker; the index in this list is the fixed order
  // partial sums are combined in, and how errors number workers.
  std::vector<std::string> workers;
  // Deadline of every Compute call, and of each probe of a down worker.
  int rpc_deadline_ms = 10000;
  // Connect asks every worker for Info fail-fast (a refused or unknown
  // address fails within a second). When the answers do not cover every
  // expert, it waits up to this long for workers still starting; 0: no wait.
  int connect_timeout_ms = 0;
  // A worker that failed is not used again for this long, then probed.
  int retry_backoff_ms = 500;
  // What backoffs, idle probes and down times are measured on (null:
  // base::Clock::Real(); tests pass a testutil::FakeClock).
  const base::Clock* clock = nullptr;
  // > 0: a thread probes the workers this often (Info, fail-fast): absent
  // and down ones once their backoff passed, up ones when no layer ran for
  // this long, so that MissingExperts follows the fleet while idle (serve).
  // 0: workers are probed only as layers run.
  int health_interval_ms = 0;
  transport::TlsFiles tls;  // CA to verify workers; cert + key for mTLS
  // The coordinator's checkpoint fingerprint (model::FingerprintCheckpoint
  // or a pack manifest's source_fingerprint). Required.
  std::string expected_fingerprint;
  // Empty, or [layer * num_experts + expert]: the XXH3-64 of each expert's
  // run in the coordinator's in-place pack of that checkpoint. A worker
  // whose Info lists checksums (ExpertList.checksums) must match them all.
  std::vector<uint64_t> expected_checksums;
  bool row_sums = false;  // see the header comment
  // Largest message of one call, in bytes; 0: the workers' own limit
  // (InfoResponse.max_request_bytes). Calls are split by rows above it.
  uint64_t max_call_bytes = 0;
  // Deadline of a Prefetch hint: short, since a late hint is useless.
  int prefetch_deadline_ms = 1000;
  // Hints in flight at most (a hung worker must not pile them up); more
  // are dropped and counted.
  int max_prefetch_in_flight = 64;
};

// One worker's RPCs since Connect, for /metrics (the labels are the
// --workers addresses, a fixed set).
struct WorkerRpcStats {
  std::string address;
  // Compute calls answered (OK or not), from send to answer; of them failed.
  base::LatencyCounts compute;
  uint64_t compute_failed = 0;
  // Info probes of the worker (after it was down, while it was absent, and
  // serve's idle health checks); of them failed.
  base::LatencyCounts info;
  uint64_t info_failed = 0;
  uint64_t prefetch_sent = 0;  // Prefetch hints sent to it
  uint64_t failovers = 0;      // times it was marked down (experts re-dealt)
  bool up = true;              // not marked down now
};

// Counters since Connect (for --stats and the benchmarks).
struct RemoteStats {
  uint64_t layers = 0;          // ComputeLayer calls with tasks
  uint64_t calls = 0;           // Compute RPCs sent, retries included
  uint64_t retried_calls = 0;   // of which re-sent after a failure
  uint64_t failed_calls = 0;    // RPCs that failed
  uint64_t request_bytes = 0;   // serialized request payloads
  uint64_t response_bytes = 0;  // serialized response payloads
  double layer_seconds = 0;     // wall time inside ComputeLayer
  // Per layer, the slowest call's worker-side wall time (receive to send),
  // summed: the part of layer_seconds spent in workers.
  double worker_seconds = 0;
  // Per layer, the slowest call from send to its callback, summed.
  double rpc_seconds = 0;
  // Expert bytes the workers read, and per layer the bytes of the worker
  // that read the most, summed: their ratio is the speed-up over one disk
  // that N disks of equal bandwidth give when reads dominate (how evenly
  // the layers' reads were spread).
  uint64_t worker_bytes_read = 0;
  uint64_t busiest_worker_bytes = 0;
  // Split fleets: of worker_bytes_read, bytes the down rounds read (slices
  // no longer resident since their gate/up round; 0 when the grouping by
  // resident_experts works).
  uint64_t split_down_bytes_read = 0;
  // Each layer's overhead (wall - slowest worker), in order, for
  // percentiles; the first 1M layers.
  std::vector<float> layer_overhead_seconds;
  // Prefetch hints: RPCs sent, of which failed (error or deadline), hints
  // dropped unsent (too many in flight, or no live holder), experts named
  // in sent hints, and experts the workers scheduled reads for.
  uint64_t prefetch_calls = 0;
  uint64_t prefetch_failed = 0;
  uint64_t prefetch_dropped = 0;
  uint64_t prefetch_experts = 0;
  uint64_t prefetch_scheduled = 0;
  std::vector<WorkerRpcStats> workers;  // in --workers order
  // layer_seconds - worker_seconds: building requests, (de)serialization,
  // transport, scheduling and the combine.
  double overhead_seconds() const { return layer_seconds - worker_seconds; }
};

class WorkerTransport;

class RemoteExperts : public ExpertBackend {
 public:
  // Opens one channel per worker, asks each for Info (waiting up to
  // connect_timeout_ms), and checks fingerprint, shape and coverage.
  static absl::StatusOr<std::unique_ptr<RemoteExperts>> Connect(
      const model::MoeSpec& config, const RemoteExpertsOptions& options);
  // The same over a transport of the caller's (tests: a fake fleet);
  // options.workers still names the workers, in the transport's order.
  static absl::StatusOr<std::unique_ptr<RemoteExperts>> ConnectWith(
      const model::MoeSpec& config, const RemoteExpertsOptions& options,
      std::unique_ptr<WorkerTransport> transport);
  ~RemoteExperts() override;

  absl::Status ComputeLayer(int layer, const float* z, int rows,
                            const std::vector<ExpertTask>& tasks,
                            float* out) override;
  // Sends Prefetch hints (see the header comment); returns at once.
  // InvalidArgument only for a layer or expert index out of range (a bug
  // of the caller); a hint that cannot be sent or fails is counted.
  absl::Status PrefetchLayer(int layer,
                             const std::vector<int>& experts) override;

  ExpertBackendStats backend_stats() const override;
  // A snapshot, with the Prefetch answers that have arrived by now (reads
  // them, so call it from the thread that runs the forward pass).
  RemoteStats remote_stats() const;
  // One line per worker: address, shard, owned experts, state.
  std::string Describe() const;
  // Empty while every routed expert has a worker not marked down; else
  // "N (layer, expert) pairs have no live worker (layer L experts a,b;
  // ...)". As of the last layer computed or health probe. Thread-safe:
  // serve's /readyz reads it from the HTTP threads.
  std::string MissingExperts() const;
  // Probes the workers now, as the health thread does (see
  // RemoteExpertsOptions::health_interval_ms). Thread-safe.
  void CheckWorkers();

 private:
  struct Impl;
  explicit RemoteExperts(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_REMOTE_REMOTE_EXPERTS_H_
