// The whole Kimi K3 forward pass: embedding, decoder layers, AttnRes head,
// final norm and lm_head, over any number of tokens per call (a whole
// prompt in one batched pass, or one token per decode step). Sequence state
// (KDA recurrent state and conv history, MLA latent cache) is carried in a
// SequenceState so prefill and incremental decode compose exactly.
//
// Thread-compatibility: one Forward at a time per K3Model (it owns the
// thread pool and the expert read buffers).
#ifndef FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_MODEL_H_
#define FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/families/kimi_k3/kda.h"
#include "coordinator/families/kimi_k3/mla.h"
#include "coordinator/families/kimi_k3/trunk.h"
#include "coordinator/families/kimi_k3/weights.h"
#include "coordinator/model/expert_backend.h"
#include "coordinator/model/language_model.h"
#include "shared/family/kimi_k3/kimi_k3_config.h"
#include "shared/kernels/thread_pool.h"
#include "shared/model/tensor_source.h"

namespace flotilla::coordinator {

struct SequenceState : public ModelSequence {
  std::vector<KdaState> kda;  // indexed by layer; empty entries for MLA
  std::vector<MlaCache> mla;  // indexed by layer; empty entries for KDA
  size_t positions = 0;       // tokens consumed so far
  // The model's config (KdaUndo and the cache widths); set by NewSequence.
  const model::K3Config* config = nullptr;

  size_t bytes() const override;
  // A copy without the KDA undo records (they serve only this state's next
  // Truncate).
  std::unique_ptr<ModelSequence> Clone() const override;
  absl::Status Save(std::string* out) const override;
  // The KDA layers keep undo records from now on (KdaState::Undo).
  bool PrepareUndo(size_t added) override;
  // Back to `n` positions inside the last forward: each KDA layer rebuilt
  // from its undo record, each MLA cache cut.
  bool Truncate(size_t n) override;
};

struct ModelOptions {
  int threads = 1;  // compute threads (>= 1), the caller's thread included
};

class K3Model : public LanguageModel {
 public:
  // Takes ownership of `source`; binds and validates every trunk tensor and
  // every expert's layout. Errors name the tensor and file.
  static absl::StatusOr<std::unique_ptr<K3Model>> Load(
      std::unique_ptr<model::TensorSource> source,
      const model::K3Config& config, const ModelOptions& options);

  // Opens a Hugging Face model directory: config.json and safetensors
  // (through model.safetensors.index.json when present). `config_path`
  // overrides <dir>/config.json when non-empty.
  static absl::StatusOr<std::unique_ptr<K3Model>> OpenDir(
      const std::string& dir, const std::string& config_path,
      const ModelOptions& options);

  const model::K3Config& config() const { return config_; }
  SequenceState NewSequence() const;

  // Feeds `ids` (appended after the state's positions) through the model.
  // logits receives [ids.size()][vocab] when all_positions, else the last
  // position's [vocab]. InvalidArgument for an id outside the vocabulary.
  absl::Status Forward(SequenceState* state, const std::vector<int32_t>& ids,
                       bool all_positions, std::vector<float>* logits);

  // LanguageModel.
  int vocab_size() const override { return config_.vocab_size; }
  std::unique_ptr<ModelSequence> StartSequence() const override {
    return std::make_unique<SequenceState>(NewSequence());
  }
  absl::StatusOr<std::unique_ptr<ModelSequence>> LoadSequence(
      absl::string_view bytes) const override;
  absl::Status Forward(ModelSequence* sequence, const std::vector<int32_t>& ids,
                       bool all_positions, std::vector<float>* logits) override;
  // One step for all sequences together: each trunk layer acquired once and
  // each routed expert asked for once per step (DecoderLayerForward).
  absl::Status ForwardBatch(
      const std::vector<ModelSequence*>& sequences,
      const std::vector<std::vector<int32_t>>& ids,
      std::vector<std::vector<float>>* last_logits) override;

  // Assembles a model from parts (the streaming path builds its own trunk
  // and expert backend). `keep_alive` is destroyed after the parts.
  static std::unique_ptr<K3Model> FromParts(
      const model::K3Config& config, std::unique_ptr<kernels::ThreadPool> pool,
      std::unique_ptr<TrunkProvider> trunk,
      std::unique_ptr<ExpertBackend> experts, std::shared_ptr<void> keep_alive);

  TrunkProvider* trunk() { return trunk_.get(); }
  // Before each MoE layer's attention, hand the backend a guess of the
  // layer's experts (top k + extra per token) to start reading.
  void set_expert_lookahead(bool on, int extra = 0) {
    expert_lookahead_ = on;
    lookahead_extra_ = extra;
  }
  ExpertBackend* experts() override { return experts_.get(); }
  kernels::ThreadPool* pool() { return pool_.get(); }
  // Bytes of trunk weights held in RAM by the in-memory path (0 otherwise).
  uint64_t resident_trunk_bytes() const override {
    return resident_trunk_bytes_;
  }

 private:
  K3Model() = default;
  // The sequence as a Kimi K3 one, after checking `ids`.
  absl::StatusOr<SequenceState*> CheckInput(
      ModelSequence* sequence, const std::vector<int32_t>& ids) const;
  // The forward pass over states[i] taking *ids[i] (checked ids), one
  // sequence after another; logits receives the head's output for the step
  // rows in `out_rows`, [out_rows.size()][vocab].
  absl::Status Step(const std::vector<SequenceState*>& states,
                    const std::vector<const std::vector<int32_t>*>& ids,
                    const std::vector<size_t>& out_rows,
                    std::vector<float>* logits);

  model::K3Config config_;
  std::shared_ptr<void> keep_alive_;  // e.g. the tensor source
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<TrunkProvider> trunk_;
  std::unique_ptr<ExpertBackend> experts_;
  uint64_t resident_trunk_bytes_ = 0;
  bool expert_lookahead_ = false;
  int lookahead_extra_ = 0;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_FAMILIES_KIMI_K3_MODEL_H_
