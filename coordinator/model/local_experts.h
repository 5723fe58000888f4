// LocalExperts: routed experts computed in this process from a TensorSource
// (a safetensors checkpoint, or float tensors in tests). Experts may be
// MXFP4 (weight_packed + weight_scale, U8) or dense (F32/BF16 `.weight`);
// the layout of every expert is validated once at construction so a bad
// checkpoint fails at load, naming the tensor.
//
// Thread-compatibility: ComputeLayer is called from one thread at a time; it
// uses `pool` for the matrix products.
#ifndef FLOTILLA_COORDINATOR_MODEL_LOCAL_EXPERTS_H_
#define FLOTILLA_COORDINATOR_MODEL_LOCAL_EXPERTS_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model/expert_backend.h"
#include "shared/kernels/kernels.h"
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
  // One of w1, w2, w3 of one expert.
  struct ExpertMatrix {
    const model::TensorInfo* packed = nullptr;  // MXFP4 nibbles, or dense
    const model::TensorInfo* scale = nullptr;   // null for dense
    size_t rows = 0, cols = 0;
  };
  struct Expert {
    ExpertMatrix w[3];  // w1 (gate), w2 (down), w3 (up)
  };

  LocalExperts(const model::TensorSource* source, const model::K3Config& c,
               kernels::ThreadPool* pool)
      : source_(source), config_(c), pool_(pool) {}

  absl::Status Bind(int only_layer);
  absl::Status BindMatrix(int layer, int expert, int which, size_t rows,
                          size_t cols, ExpertMatrix* m);
  // Reads matrix m into `buf` and multiplies n rows of x by it.
  absl::Status Apply(const ExpertMatrix& m, const float* x, size_t n, float* y,
                     std::vector<uint8_t>* buf);

  const model::TensorSource* source_;
  model::K3Config config_;
  kernels::ThreadPool* pool_;
  // experts_[layer][expert]; empty for dense layers.
  std::vector<std::vector<Expert>> experts_;
  std::vector<uint8_t> buf_;  // reused read buffer
  uint64_t bytes_read_ = 0;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_LOCAL_EXPERTS_H_
