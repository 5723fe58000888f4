// A draft model as the drafter (`--draft-model DIR`): a smaller model with
// the same tokenizer, run by the same engine code, guesses greedily. Its
// own sequence follows the accepted history: each Draft feeds what was
// accepted since the last call, guesses, then drops its guesses again
// (ModelSequence::Truncate, or the copy kept before guessing when the state
// cannot go back that far).
#ifndef FLOTILLA_COORDINATOR_DRAFT_MODEL_H_
#define FLOTILLA_COORDINATOR_DRAFT_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/engine.h"
#include "coordinator/speculate.h"

namespace flotilla::coordinator {

// Whether a draft model at `draft_dir` reads and writes text as the model
// at `model_dir` does: both without a tokenizer, or the same bytes for
// every token id and the same stop ids. InvalidArgument naming the first
// id that differs (a vocabulary of the same size is not the same
// tokenizer: its drafts would be other words).
absl::Status CheckDraftTokenizer(const std::string& model_dir,
                                 const std::string& draft_dir);

class ModelDrafter : public Drafter {
 public:
  // The draft engine's model must have `vocab_size` tokens (the target's):
  // InvalidArgument naming both otherwise.
  static absl::StatusOr<std::unique_ptr<ModelDrafter>> Create(
      std::unique_ptr<Engine> draft, int vocab_size);

  // No guess after an error of the draft model (the pass is then a plain
  // step); the error is kept in status().
  std::vector<int32_t> Draft(const std::vector<int32_t>& history,
                             int max_tokens) override;
  const absl::Status& status() const { return status_; }

 private:
  explicit ModelDrafter(std::unique_ptr<Engine> draft)
      : engine_(std::move(draft)) {}
  absl::Status Guess(const std::vector<int32_t>& history, int max_tokens,
                     std::vector<int32_t>* out);

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ModelSequence> state_;
  std::vector<int32_t> fed_;   // the history state_ holds
  std::vector<float> logits_;  // after fed_'s last token
  absl::Status status_;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_DRAFT_MODEL_H_
