// Where routed experts are computed: LocalExperts (in-memory tensors),
// StreamingExperts (this process, runs streamed from disk) or RemoteExperts
// (gRPC workers). The
// forward pass hands over every (row, expert, weight) task of one MoE layer
// for all tokens of the step at once, so each expert is read at most once per
// step however many tokens chose it.
#ifndef FLOTILLA_COORDINATOR_MODEL_EXPERT_BACKEND_H_
#define FLOTILLA_COORDINATOR_MODEL_EXPERT_BACKEND_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "shared/base/latency_counts.h"
#include "shared/experts/expert_types.h"

namespace flotilla::coordinator {

// One (row, expert, weight) of a layer: row in the step's activation
// matrix, expert in [0, num_experts), combine weight after renormalisation
// and scaling. The one assignment type of every backend and the workers.
using ExpertTask = experts::ExpertAssignment;

// Counters since the backend was created (for --stats).
struct ExpertBackendStats {
  uint64_t bytes_read = 0;     // expert bytes read from disk
  uint64_t experts_read = 0;   // expert runs read
  uint64_t experts_used = 0;   // distinct experts computed, summed per layer
  uint64_t cache_hits = 0;     // served from a resident cache, no read
  uint64_t prefetch_hits = 0;  // served from a lookahead prefetch
  double io_wait_seconds = 0;  // blocked waiting for expert bytes
  double compute_seconds = 0;  // computing experts
  double verify_seconds = 0;   // checksumming expert runs read
  // Of verify_seconds, hashing done as prefetched runs landed while the
  // step waited on the disk (off the compute path).
  double early_verify_seconds = 0;
  // Each expert read this process made, queued to reaped (local reads only;
  // with expert workers their own metrics hold them).
  base::LatencyCounts read_latency;
};

class ExpertBackend {
 public:
  virtual ~ExpertBackend() = default;

  virtual ExpertBackendStats backend_stats() const {
    return ExpertBackendStats();
  }

  // Token-to-expert routings per MoE layer so far (index: layer), which the
  // forward pass records after each ComputeLayer whatever the backend: the
  // per-layer activations on /metrics. Same thread as ComputeLayer.
  void RecordRouted(int layer, size_t tasks) {
    if (layer < 0) return;
    if (routed_by_layer_.size() <= static_cast<size_t>(layer)) {
      routed_by_layer_.resize(layer + 1, 0);
    }
    routed_by_layer_[layer] += tasks;
  }
  const std::vector<uint64_t>& routed_by_layer() const {
    return routed_by_layer_;
  }

  // Lookahead: experts `layer` will probably need, predicted before the
  // layer's attention runs (DESIGN: the disk idles during attention). The
  // backend may start reading them now; a hint only, it never changes
  // results. Errors are the backend's own failures (e.g. a broken reader),
  // never a wrong guess.
  virtual absl::Status PrefetchLayer(int layer,
                                     const std::vector<int>& experts) {
    return absl::OkStatus();
  }

  // z: [rows][latent] latent activations. out: [rows][latent], overwritten:
  // out[r] = sum over r's tasks, in task order, of weight * E(z[r]) where
  // E(z) = W2 SiTU(W1 z, W3 z). The sum is accumulated in double and rounded
  // once, so the result does not depend on how experts are grouped for I/O.
  virtual absl::Status ComputeLayer(int layer, const float* z, int rows,
                                    const std::vector<ExpertTask>& tasks,
                                    float* out) = 0;

 private:
  std::vector<uint64_t> routed_by_layer_;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_EXPERT_BACKEND_H_
