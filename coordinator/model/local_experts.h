// LocalExperts: the ExpertBackend of a model held in memory. The experts
// are shared/experts' InMemoryExperts (the reference every other backend
// matches bit for bit); this adapter only gives them the forward pass's
// interface.
//
// Thread-compatibility: ComputeLayer is called from one thread at a time.
#ifndef FLOTILLA_COORDINATOR_MODEL_LOCAL_EXPERTS_H_
#define FLOTILLA_COORDINATOR_MODEL_LOCAL_EXPERTS_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model/expert_backend.h"
#include "shared/experts/in_memory_experts.h"
#include "shared/kernels/thread_pool.h"
#include "shared/model/moe_spec.h"
#include "shared/model/tensor_source.h"

namespace flotilla::coordinator {

class LocalExperts : public ExpertBackend {
 public:
  // `source` and `pool` must outlive the backend. Binds every MoE layer,
  // or only `only_layer` when it is >= 0 (layer fixtures hold one layer).
  // `resident`: read every expert once now and hold it (the budget charged
  // them resident); else each use reads from `source`, and counts as read.
  static absl::StatusOr<std::unique_ptr<LocalExperts>> Create(
      const model::TensorSource* source, const model::MoeSpec& config,
      kernels::ThreadPool* pool, int only_layer = -1, bool resident = false) {
    absl::StatusOr<std::unique_ptr<experts::InMemoryExperts>> experts =
        experts::InMemoryExperts::Create(source, config, pool, only_layer,
                                         resident);
    if (!experts.ok()) return experts.status();
    return std::unique_ptr<LocalExperts>(new LocalExperts(*std::move(experts)));
  }

  // Counts the layer's distinct experts and its compute time, as the
  // streaming and remote backends do (/metrics' expert activations and
  // compute seconds are not 0 because the experts are resident).
  absl::Status ComputeLayer(int layer, const float* z, int rows,
                            const std::vector<ExpertTask>& tasks,
                            float* out) override {
    const auto start = std::chrono::steady_clock::now();
    absl::Status status =
        experts_->ComputeLayer(layer, z, rows, tasks.data(), tasks.size(), out);
    compute_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    distinct_.clear();
    for (const ExpertTask& t : tasks) distinct_.push_back(t.expert);
    std::sort(distinct_.begin(), distinct_.end());
    experts_used_ += static_cast<uint64_t>(
        std::unique(distinct_.begin(), distinct_.end()) - distinct_.begin());
    return status;
  }

  ExpertBackendStats backend_stats() const override {
    ExpertBackendStats s;
    s.bytes_read = experts_->bytes_read();
    s.experts_used = experts_used_;
    s.compute_seconds = compute_seconds_;
    return s;
  }

 private:
  explicit LocalExperts(std::unique_ptr<experts::InMemoryExperts> experts)
      : experts_(std::move(experts)) {}

  std::unique_ptr<experts::InMemoryExperts> experts_;
  uint64_t experts_used_ = 0;
  double compute_seconds_ = 0;
  std::vector<int32_t> distinct_;  // scratch of ComputeLayer
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_LOCAL_EXPERTS_H_
