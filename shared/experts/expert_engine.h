// ExpertEngine: one MoE layer's routed experts for a batch of rows, streamed
// from disk. ExpertIndex (where) + ExpertFetcher (reads into slots) +
// ExpertExecutor (compute). Used by the coordinator's StreamingExperts and,
// later, by expert workers serving Compute RPCs.
//
// ComputeLayer groups the (row, expert, weight) assignments by expert, fetches
// every distinct expert once (all reads issued at once, slots permitting),
// computes each expert on its gathered rows as soon as its bytes land, keeps
// one output per assignment, and finally combines per row IN ASSIGNMENT
// ORDER, accumulating in double and rounding once. Completion order, slot
// count, cache and prefetch therefore never change a bit of the result, and
// it is bitwise identical to coordinator::LocalExperts.
//
// Thread-compatibility: not thread-safe; one thread calls ComputeLayer /
// Prefetch at a time. Scratch is reused across calls.
#ifndef FLOTILLA_SHARED_EXPERTS_EXPERT_ENGINE_H_
#define FLOTILLA_SHARED_EXPERTS_EXPERT_ENGINE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/experts/expert_executor.h"
#include "shared/experts/expert_fetcher.h"
#include "shared/experts/expert_index.h"
#include "shared/kernels/thread_pool.h"

namespace flotilla::experts {

// What ComputeTasks computes per task (ExpertExecutor):
//  kWhole   whole experts: [L] -> [L]
//  kGateUp  row slices: [L] -> [I_k], SiTU(W1 x, W3 x) for the rows held
//  kDown    row slices: [I] -> [L_k], W2 act for the rows held
enum class ExpertPhase { kWhole, kGateUp, kDown };

struct ExpertEngineOptions {
  FetcherOptions fetcher;
  // When > 0, sets fetcher.cache_slots to how many whole slots fit in it.
  uint64_t cache_bytes = 0;
  // When > 0, the index holds row slices of experts of this intermediate
  // size (ExpertExecutor::CreateSliced): kWhole then works only when the
  // slices are whole experts. kGateUp / kDown always work.
  uint64_t sliced_intermediate = 0;
};

class ExpertEngine {
 public:
  // act: the experts' activation (MoeSpec::Activation). `pool` may be null
  // and must outlive the engine.
  static absl::StatusOr<std::unique_ptr<ExpertEngine>> Create(
      ExpertIndex index, const model::GluActivation& act,
      kernels::ThreadPool* pool, const ExpertEngineOptions& options);

  // z: [rows][L]; out: [rows][L], overwritten (rows no assignment names are
  // zero). out[r] = sum over r's assignments, in order, of weight * E(z[r]).
  // `lookahead`: see ExpertFetcher::Fetch. Errors name the layer, expert,
  // file and offset.
  absl::Status ComputeLayer(int layer, const float* z, int rows,
                            const ExpertAssignment* tasks, size_t num_tasks,
                            float* out,
                            const std::vector<ExpertKey>* lookahead = nullptr);

  // Per-task unweighted outputs: task_out[i] = phase(in[tasks[i].row]),
  // [num_tasks][OutWidth(phase)]; in: [rows][InWidth(phase)]. Weights are
  // ignored. Same grouping, reads and kernels as ComputeLayer.
  absl::Status ComputeTasks(ExpertPhase phase, int layer, const float* in,
                            int rows, const ExpertAssignment* tasks,
                            size_t num_tasks, float* task_out,
                            const std::vector<ExpertKey>* lookahead = nullptr);
  size_t InWidth(ExpertPhase phase) const;
  size_t OutWidth(ExpertPhase phase) const;
  bool sliced() const { return executor_->sliced(); }

  // Largest scratch one ComputeLayer(rows, num_tasks) (or ComputeTasks)
  // can grow to, in bytes, for callers that charge it to a memory budget.
  uint64_t ScratchBytesFor(size_t rows, size_t num_tasks) const;
  // Scratch held now (capacity), and freeing it when above `keep_bytes`.
  uint64_t scratch_bytes() const;
  void TrimScratch(uint64_t keep_bytes);

  // Immediate prefetch (ExpertFetcher::Prefetch).
  absl::Status Prefetch(const std::vector<ExpertKey>& keys) {
    return fetcher_->Prefetch(keys);
  }

  const ExpertIndex& index() const { return *index_; }
  ExpertFetcher& fetcher() { return *fetcher_; }
  const FetchStats& stats() const { return fetcher_->stats(); }
  size_t latent() const { return executor_->latent(); }

 private:
  ExpertEngine() = default;
  // Fetch callback: computes `key`'s rows of the current call.
  absl::Status OnReady(const ExpertKey& key, const uint8_t* run);

  // Owned on the heap so the fetcher's pointer stays valid.
  std::unique_ptr<ExpertIndex> index_;
  std::unique_ptr<ExpertExecutor> executor_;
  std::unique_ptr<ExpertFetcher> fetcher_;
  // The current call's inputs and outputs (valid during it only).
  ExpertPhase phase_ = ExpertPhase::kWhole;
  const float* z_ = nullptr;
  const ExpertAssignment* tasks_ = nullptr;
  float* task_out_ptr_ = nullptr;  // [num_tasks][OutWidth(phase_)]
  // Scratch reused across calls.
  std::vector<uint32_t> group_begin_;  // [num_experts + 1] into order_
  std::vector<uint32_t> order_;        // task indices grouped by expert
  std::vector<ExpertKey> keys_;        // distinct experts, ascending
  std::vector<float> xin_, y_;         // [n][width] gathered rows / outputs
  std::vector<float> task_out_;        // [num_tasks][L]
  std::vector<double> acc_;            // [rows][L]
};

}  // namespace flotilla::experts

#endif  // FLOTILLA_SHARED_EXPERTS_EXPERT_ENGINE_H_
