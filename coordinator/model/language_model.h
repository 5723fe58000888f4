// What generation, serving and the run report need from a model, whatever
// its family: a sequence to carry state in, a forward pass over new tokens,
// and the expert backend for counters. Kimi K3 (K3Model) and Mixtral
// (families/mixtral) implement it; each keeps its own weights and state.
#ifndef FLOTILLA_COORDINATOR_MODEL_LANGUAGE_MODEL_H_
#define FLOTILLA_COORDINATOR_MODEL_LANGUAGE_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "coordinator/model/expert_backend.h"

namespace flotilla::coordinator {

// Per-sequence state (KV cache, recurrent state) of one model.
class ModelSequence {
 public:
  virtual ~ModelSequence() = default;
  virtual size_t bytes() const = 0;  // memory the state holds
  // An independent copy: continuing either never changes the other (a
  // conversation's next turn resumes from a copy of the last one's state).
  // It holds no spare capacity, so a kept copy costs only its contents.
  virtual std::unique_ptr<ModelSequence> Clone() const = 0;
  // The state as bytes, for a prefix cache that outlives the process; the
  // model that made it reads them back (LanguageModel::LoadSequence).
  // Unimplemented for a state that cannot be saved.
  virtual absl::Status Save(std::string* out) const {
    (void)out;
    return absl::UnimplementedError("this model's state cannot be saved");
  }
  // Drops every position from `positions` on (speculative decoding's
  // rejected guesses), as if they had never been fed. False, changing
  // nothing, where the state cannot go back (a recurrent state, a sliding
  // window already trimmed past it): the caller restores a copy instead.
  virtual bool Truncate(size_t positions) {
    (void)positions;
    return false;
  }
  // Before feeding `added` more tokens in one Forward: whether Truncate
  // back to the positions held now will then work. A state that needs to
  // prepare for it (keep what it would otherwise overwrite) does so here;
  // it promises nothing across several forwards. False: the caller keeps a
  // Clone instead.
  virtual bool PrepareUndo(size_t added) {
    (void)added;
    return false;
  }
  // Whether Truncate will go back to any earlier position whatever is fed
  // first (every position stays held: a plain KV or latent cache). A prefix
  // cache cuts such a state back to the part a new prompt shares; any other
  // state (recurrent, windowed) is also kept at its prompt's end.
  virtual bool RewindsAnywhere() const { return false; }
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;

  virtual int vocab_size() const = 0;
  // Positions the model was trained for (config max_position_embeddings),
  // or 0 when its config names none.
  virtual int max_positions() const { return 0; }
  virtual std::unique_ptr<ModelSequence> StartSequence() const = 0;
  // A state saved by ModelSequence::Save from a model of this shape.
  // InvalidArgument when the bytes do not fit it (cut short, other
  // dimensions); Unimplemented for a model whose states are not saved.
  virtual absl::StatusOr<std::unique_ptr<ModelSequence>> LoadSequence(
      absl::string_view bytes) const {
    (void)bytes;
    return absl::UnimplementedError("this model's states cannot be loaded");
  }
  // Feeds `ids` (after the sequence's positions so far). logits receives
  // [ids.size()][vocab] when all_positions, else the last position's
  // [vocab]. InvalidArgument for an id outside the vocabulary or a
  // sequence made by another model.
  virtual absl::Status Forward(ModelSequence* sequence,
                               const std::vector<int32_t>& ids,
                               bool all_positions,
                               std::vector<float>* logits) = 0;
  // One step for several sequences at once: sequences[i] takes ids[i] (its
  // prompt chunk, or its last token) and (*last_logits)[i] receives the
  // [vocab] logits of its last position. Results are bitwise those of
  // calling Forward on each sequence alone. This default does exactly that;
  // a model that can share the step's weight and expert reads across the
  // sequences (Mixtral) overrides it.
  virtual absl::Status ForwardBatch(
      const std::vector<ModelSequence*>& sequences,
      const std::vector<std::vector<int32_t>>& ids,
      std::vector<std::vector<float>>* last_logits) {
    last_logits->resize(sequences.size());
    for (size_t i = 0; i < sequences.size(); ++i) {
      absl::Status s = Forward(sequences[i], ids[i], false, &(*last_logits)[i]);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  // ForwardBatch where sequence i with all_rows[i] set receives the logits
  // of every row it fed, [ids[i].size()][vocab] (speculative passes inside
  // a batch). This default runs Forward on each sequence alone.
  virtual absl::Status ForwardBatchRows(
      const std::vector<ModelSequence*>& sequences,
      const std::vector<std::vector<int32_t>>& ids,
      const std::vector<bool>& all_rows,
      std::vector<std::vector<float>>* logits) {
    logits->resize(sequences.size());
    for (size_t i = 0; i < sequences.size(); ++i) {
      absl::Status s =
          Forward(sequences[i], ids[i], all_rows[i], &(*logits)[i]);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  virtual ExpertBackend* experts() = 0;
  // Bytes of trunk weights held in RAM by the in-memory path (0 otherwise).
  virtual uint64_t resident_trunk_bytes() const = 0;
};

// What every Forward checks first: at least one id, each inside
// [0, vocab_size). InvalidArgument naming the first bad id otherwise.
inline absl::Status CheckTokenIds(const std::vector<int32_t>& ids,
                                  int vocab_size) {
  if (ids.empty()) return absl::InvalidArgumentError("no tokens to process");
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", ids[i], " at position ", i,
                       " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_LANGUAGE_MODEL_H_
