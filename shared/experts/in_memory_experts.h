// InMemoryExperts: routed experts computed from a TensorSource (a
// safetensors checkpoint, or float tensors in tests): the in-memory
// reference every other path must match bit for bit. The tensors are
// checked once at construction by the one expert-tensor checker
// (expert_tensors.h), so a bad checkpoint fails at load naming the tensor;
// the arithmetic is ExpertExecutor's, the same code the streamed backend
// and the workers run, and the combine is combine.h's task-order rule.
// The coordinator's LocalExperts and the workers' tests both use it.
//
// Thread-compatibility: ComputeLayer is called from one thread at a time; it
// uses `pool` for the matrix products.
#ifndef FLOTILLA_SHARED_EXPERTS_IN_MEMORY_EXPERTS_H_
#define FLOTILLA_SHARED_EXPERTS_IN_MEMORY_EXPERTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/experts/expert_executor.h"
#include "shared/experts/expert_tensors.h"
#include "shared/experts/expert_types.h"
#include "shared/kernels/thread_pool.h"
#include "shared/model/moe_spec.h"
#include "shared/model/tensor_source.h"

namespace flotilla::experts {

class InMemoryExperts {
 public:
  // `source` and `pool` (may be null) must outlive the object. Binds every
  // MoE layer, or only `only_layer` when it is >= 0 (layer fixtures hold a
  // single layer). `resident`: every expert is read once here and held
  // (what a budget that charged them resident pays for); otherwise each
  // use reads its expert from `source` again.
  static absl::StatusOr<std::unique_ptr<InMemoryExperts>> Create(
      const model::TensorSource* source, const model::MoeSpec& config,
      kernels::ThreadPool* pool, int only_layer = -1, bool resident = false);

  // z: [rows][L]; out: [rows][L], overwritten: out[r] = sum over r's
  // assignments, in order, of weight * E(z[r]), in double, rounded once.
  absl::Status ComputeLayer(int layer, const float* z, int rows,
                            const ExpertAssignment* tasks, size_t num_tasks,
                            float* out);

  // Bytes read from `source`: at Create when resident, else per use.
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  InMemoryExperts(const model::TensorSource* source, const model::MoeSpec& c)
      : source_(source), config_(c) {}

  absl::Status Bind(int only_layer, kernels::ThreadPool* pool);
  absl::Status ReadAll();
  // Reads `tensors`' parts back to back into run_, recording their offsets
  // in `loc`.
  absl::Status ReadRun(const ExpertTensors& tensors, ExpertLocation* loc);

  const model::TensorSource* source_;
  model::MoeSpec config_;
  // experts_[layer][expert]; empty for dense layers.
  std::vector<std::vector<ExpertTensors>> experts_;
  std::unique_ptr<ExpertExecutor> executor_;
  std::vector<uint8_t> run_;  // one expert's tensors, reused
  // Resident: each expert's run and where its tensors sit in it.
  std::vector<std::vector<std::vector<uint8_t>>> runs_;
  std::vector<std::vector<ExpertLocation>> locations_;
  uint64_t bytes_read_ = 0;
};

}  // namespace flotilla::experts

#endif  // FLOTILLA_SHARED_EXPERTS_IN_MEMORY_EXPERTS_H_
