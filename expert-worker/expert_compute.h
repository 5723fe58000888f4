// The worker's compute core, free of gRPC and protobuf: validates one
// Compute call against the shard plan, then runs it on an ExpertEngine
// (shared/experts: every distinct expert read once with O_DIRECT, all reads
// issued at once, each expert computed on all its rows as its bytes land).
//
// Results: for every assignment i the unweighted expert output
// E_i = E_expert(z[row]) (float32), computed exactly as LocalExperts and
// StreamingExperts compute it (ExpertEngine::ComputeTasks: the same
// grouping, kernels and reduction order, before any weighting). From these
// either
//   * expert outputs are returned as they are (the coordinator combines in
//     task order: bitwise identical to single-process), or
//   * row sums: per row, sum over its assignments in request order of
//     double(weight) * E_i, kept in double.
//
// Memory: every call's buffers (request, response, scratch) are charged to
// the worker's --mem accountant for as long as the call lives (CallBytes;
// the server charges at arrival, so queued calls count too). Scratch is kept
// between calls up to kKeptScratchBytes (charged once, at Create) so decode
// calls never allocate; a larger call's scratch is freed after it.
//
// Thread-compatibility: Validate, ValidatePrefetch, CallBytes and
// accountant() may run on any thread concurrently with Run; Run and
// Prefetch must be called from one thread at a time (the server's compute
// thread).
#ifndef FLOTILLA_EXPERT_WORKER_EXPERT_COMPUTE_H_
#define FLOTILLA_EXPERT_WORKER_EXPERT_COMPUTE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "expert-worker/shard_plan.h"
#include "shared/experts/expert_engine.h"
#include "shared/io/memory_budget.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::expert_worker {

// Limits that bound the work and memory one call may ask for, whatever its
// message size. Far above what a forward step needs (K3 prefill of 256
// tokens x 16 experts = 4096 assignments).
inline constexpr uint32_t kMaxRowsPerCall = 1 << 16;
inline constexpr uint32_t kMaxAssignmentsPerCall = 1 << 18;
// Scratch kept between calls, by ExpertCompute and by its ExpertEngine
// each: a K3 decode call (16 tasks x 3584 floats) needs about 1.2 MB.
inline constexpr uint64_t kKeptScratchBytes = uint64_t{2} << 20;
// Slices a split worker keeps resident, per expert a token routes to: the
// down-projection call of a decode step's layer then reads nothing (the
// coordinator sends bigger steps in groups of this many experts).
inline constexpr int kSplitCacheSlotsPerToken = 1;
inline int SplitResidentExperts(const model::MoeSpec& config) {
  return kSplitCacheSlotsPerToken * config.num_experts_per_token;
}
// Accountant owners: scratch kept between calls, and calls in flight.
inline constexpr char kScratchOwner[] = "worker.scratch";
inline constexpr char kCallsOwner[] = "worker.calls";

// What a call returns (proto OutputKind). The slice kinds are for split
// workers (ShardPlan::split) and the only kinds those answer.
enum class CallKind { kRowSums, kExpertOutputs, kGateUpSlice, kDownSlice };

// One Compute call, borrowed from the request.
struct ComputeCall {
  int64_t layer = 0;
  int64_t row_width = 0;
  int64_t num_rows = 0;
  const float* activations = nullptr;  // [num_rows][row_width]
  uint64_t activations_size = 0;       // floats at `activations`
  std::vector<experts::ExpertAssignment> assignments;
  CallKind kind = CallKind::kExpertOutputs;
};

// Output sizes a valid call needs (known after Validate).
struct ComputeShape {
  std::vector<uint32_t> rows;  // row-sums mode: distinct rows, ascending
  // Expert outputs: assignments * row_width; slices: assignments * the
  // slice's width.
  uint64_t output_floats = 0;
  uint64_t output_doubles = 0;  // row sums: rows.size() * row_width
  uint64_t response_bytes = 0;  // payload of the response, approximately
};

struct ComputeCallStats {
  uint64_t bytes_read = 0;
  double read_seconds = 0;     // inside the fetcher (reads and compute overlap)
  double compute_seconds = 0;  // expert kernels
  uint32_t cache_hits = 0;
  uint32_t experts_computed = 0;
  uint32_t prefetch_hits = 0;  // experts whose read a Prefetch started
};

struct ComputeOptions {
  int fetch_slots = 16;   // runs in flight / being computed
  int queue_depth = 32;   // reads in flight at most
  bool direct_io = true;  // O_DIRECT where the filesystem allows
  uint64_t max_response_bytes = uint64_t{64} << 20;
};

class ExpertCompute {
 public:
  // Opens the checkpoint's headers in plan.model_dir, indexes its experts
  // and checks that every owned (layer, expert) is there with the config's
  // shapes (or, for a split plan, the slice's); allocates the fetch slots
  // within plan.memory_budget_bytes. A split worker also keeps
  // kSplitCacheSlotsPerToken x num_experts_per_token slices resident, so
  // the down-projection call of a layer finds the slices its gate/up call
  // read.
  static absl::StatusOr<std::unique_ptr<ExpertCompute>> Create(
      const ShardPlan& plan, const ComputeOptions& options);

  // InvalidArgument (naming the first problem) unless: the kind suits the
  // worker (slice kinds exactly on split workers); the layer is an MoE
  // layer this worker owns experts of; row_width matches the model (the
  // intermediate size for kDownSlice);
  // 0 < num_rows <= kMaxRowsPerCall and activations hold exactly
  // num_rows * row_width floats; 0 < assignments <= kMaxAssignmentsPerCall;
  // every assignment names a row < num_rows and an expert this worker owns
  // in that layer, with a finite weight; no (row, expert) pair repeats; and
  // the response fits max_response_bytes.
  absl::StatusOr<ComputeShape> Validate(const ComputeCall& call) const;

  // Bytes a valid call needs besides its request message: its response
  // (payload and the serialized copy), the call's copy of the assignments
  // and the scratch of Run and of the engine, for the worst case.
  uint64_t CallBytes(const ComputeCall& call, const ComputeShape& shape) const;

  // InvalidArgument unless `layer` is an MoE layer of the model, every
  // expert index is < num_experts and there are at most num_experts of
  // them. Experts this worker does not own are not an error (the wire
  // contract ignores them).
  absl::Status ValidatePrefetch(int64_t layer,
                                const std::vector<uint32_t>& experts) const;

  // Runs a call that passed Validate (with `shape` from it). Writes
  // `outputs` [shape.output_floats] (expert outputs or slice values, per
  // assignment) or row_sums [rows][row_width].
  absl::Status Run(const ComputeCall& call, const ComputeShape& shape,
                   float* outputs, double* row_sums, ComputeCallStats* stats);

  // Starts reads of the owned ones among `experts` of `layer` into free
  // slots (advisory; see ExpertFetcher::Prefetch); never waits for I/O.
  // Returns how many were asked of the fetcher.
  absl::StatusOr<uint32_t> Prefetch(int64_t layer,
                                    const std::vector<uint32_t>& experts);

  const ShardPlan& plan() const { return plan_; }
  const ComputeOptions& options() const { return options_; }
  // The --mem ledger (fetch slots, kept scratch, calls); thread-safe.
  io::MemoryAccountant& accountant() const { return *accountant_; }
  // Fetcher counters since start, for logs.
  std::string StatsLine() const;
  // layer -> checksums of the owned experts in plan().owned_experts order,
  // from an in-place pack of the checkpoint (see ExpertList.checksums);
  // empty without one.
  const std::map<int, std::vector<uint64_t>>& source_checksums() const {
    return source_checksums_;
  }

 private:
  // Keeps the plan without its pack manifest: the index built from it is
  // all that is needed once open.
  ExpertCompute(const ShardPlan& plan, const ComputeOptions& options)
      : plan_(WithoutManifest(plan)), options_(options) {}
  static ShardPlan WithoutManifest(ShardPlan plan) {
    plan.pack_manifest.reset();
    return plan;
  }
  bool Owns(int64_t layer, int64_t expert) const;
  // Frees this object's and the engine's scratch when a call grew it past
  // kKeptScratchBytes (the charge for it ended with the call).
  void TrimScratch();

  const ShardPlan plan_;
  const ComputeOptions options_;
  // owned_[layer][expert]: whether this worker serves it.
  std::vector<std::vector<bool>> owned_;
  std::map<int, std::vector<uint64_t>> source_checksums_;
  std::unique_ptr<io::MemoryAccountant> accountant_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<experts::ExpertEngine> engine_;
  // Scratch reused across calls (the compute thread only).
  std::vector<float> outputs_;     // [n][L] row-sums mode
  std::vector<int32_t> row_slot_;  // row -> index in rows
};

}  // namespace flotilla::expert_worker

#endif  // FLOTILLA_EXPERT_WORKER_EXPERT_COMPUTE_H_
