// LocalExperts: routed experts computed in this process from a TensorSource
// (a safetensors checkpoint, or float tensors in tests): the in-memory
// reference every other backend must match bit for bit. The tensors are
// checked once at construction by the one expert-tensor checker
// (shared/experts/expert_tensors.h), so a bad checkpoint fails at load
// naming the tensor; the arithmetic is the shared ExpertExecutor's, the
// same code the streamed backend and the workers run.
//
// Thread-compatibility: ComputeLayer is called from one thread at a time; it
// uses `pool` for the matrix products.
#ifndef FLOTILLA_COORDINATOR_MODEL_LOCAL_EXPERTS_H_
#define FLOTILLA_COORDINATOR_MODEL_LOCAL_EXPERTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model/expert_backend.h"
#include "shared/experts/expert_executor.h"
#include "shared/experts/expert_tensors.h"
#include "shared/kernels/thread_pool.h"
#include "shared/model/config.h"
#include "shared/model/tensor_source.h"

namespace flotilla::coordinator {

class LocalExperts : public ExpertBackend {
 public:
  // `source` must outlive the backend.
  // Binds every MoE layer, or only `only_layer` when it is >= 0 (layer
  // fixtures hold a single layer).
  static absl::StatusOr<std::unique_ptr<LocalExperts>> Create(
      const model::TensorSource* source, const model::K3Config& config,
      kernels::ThreadPool* pool, int only_layer = -1);

  absl::Status ComputeLayer(int layer, const float* z, int rows,
                            const std::vector<ExpertTask>& tasks,
                            float* out) override;

  ExpertBackendStats backend_stats() const override {
    ExpertBackendStats s;
    s.bytes_read = bytes_read_;
    return s;
  }

 private:
  LocalExperts(const model::TensorSource* source, const model::K3Config& c)
      : source_(source), config_(c) {}

  absl::Status Bind(int only_layer, kernels::ThreadPool* pool);
  // Reads expert `tensors`' parts back to back into run_, recording their
  // offsets in `loc`.
  absl::Status ReadRun(const experts::ExpertTensors& tensors,
                       experts::ExpertLocation* loc);

  const model::TensorSource* source_;
  model::K3Config config_;
  // experts_[layer][expert]; empty for dense layers.
  std::vector<std::vector<experts::ExpertTensors>> experts_;
  std::unique_ptr<experts::ExpertExecutor> executor_;
  std::vector<uint8_t> run_;  // one expert's tensors, reused
  uint64_t bytes_read_ = 0;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_LOCAL_EXPERTS_H_
