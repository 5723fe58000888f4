// Where the forward pass gets trunk weights. A TrunkProvider hands out one
// layer at a time (Acquire/Release bracket its use), so an implementation
// may keep every layer resident (InMemoryTrunk) or stream unpinned layers
// through a ring of buffers while earlier layers compute (StreamingTrunk,
// streaming_trunk.h). The embedding is looked up by rows and the lm_head
// applied in row chunks, so neither has to be resident.
#ifndef FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_TRUNK_H_
#define FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_TRUNK_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/families/kimi_k3/weights.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/kernels/thread_pool.h"
#include "shared/model/tensor_source.h"
#include "shared/pack/region_layout.h"

namespace flotilla::coordinator {

class TrunkProvider {
 public:
  virtual ~TrunkProvider() = default;

  // Called once at the start of every forward step.
  virtual absl::Status BeginStep() { return absl::OkStatus(); }

  // Blocks until layer `layer`'s weights are available. The pointer stays
  // valid until ReleaseLayer(layer). Layers are acquired in order.
  virtual absl::StatusOr<const LayerWeights*> AcquireLayer(int layer) = 0;
  virtual void ReleaseLayer(int layer) = 0;

  // Layer `layer`'s weights if they are resident right now (pinned, or
  // already read into the ring), without blocking; else null. Used only for
  // lookahead guesses; valid until the next Acquire/Release.
  virtual const LayerWeights* PeekLayer(int layer) { return nullptr; }

  virtual const GlobalWeights& globals() const = 0;

  // out[t] = embedding row ids[t] widened to float: [ids.size()][E].
  virtual absl::Status EmbedRows(const std::vector<int32_t>& ids,
                                 float* out) = 0;

  // logits = lm_head . x for `rows` rows of x ([rows][E]): [rows][V].
  virtual absl::Status LmHead(const float* x, size_t rows, float* logits,
                              kernels::ThreadPool* pool) = 0;
};

// Every region built in RAM from a checkpoint at load time.
class InMemoryTrunk : public TrunkProvider {
 public:
  static absl::StatusOr<std::unique_ptr<InMemoryTrunk>> Build(
      const model::TensorSource& source, const model::K3Config& config);

  absl::StatusOr<const LayerWeights*> AcquireLayer(int layer) override;
  void ReleaseLayer(int layer) override {}
  const LayerWeights* PeekLayer(int layer) override {
    return layer >= 0 && layer < static_cast<int>(layers_.size())
               ? &layers_[layer]
               : nullptr;
  }
  const GlobalWeights& globals() const override { return globals_; }
  absl::Status EmbedRows(const std::vector<int32_t>& ids, float* out) override;
  absl::Status LmHead(const float* x, size_t rows, float* logits,
                      kernels::ThreadPool* pool) override;

  uint64_t bytes() const;

 private:
  InMemoryTrunk() = default;

  std::vector<pack::Region> layer_regions_;
  std::vector<LayerWeights> layers_;
  pack::Region globals_region_, embed_region_, lm_head_region_;
  GlobalWeights globals_;
  Matrix embed_, lm_head_;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_TRUNK_H_
