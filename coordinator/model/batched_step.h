// The part of LanguageModel::ForwardBatch every family shares: checking the
// batch, laying the sequences' new tokens out one after another as the
// rows of one step, and handing each sequence the logits of its last row.
// The family supplies `check` (is this its sequence, do the ids fit) and
// `step` (its forward pass over the rows).
#ifndef FLOTILLA_COORDINATOR_MODEL_BATCHED_STEP_H_
#define FLOTILLA_COORDINATOR_MODEL_BATCHED_STEP_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "coordinator/model/language_model.h"
#include "shared/base/status_macros.h"

namespace flotilla::coordinator {

// check: (ModelSequence*, const std::vector<int32_t>&) -> StatusOr<State*>.
// step: (const std::vector<State*>&, const std::vector<const
//   std::vector<int32_t>*>&, const std::vector<size_t>& out_rows,
//   std::vector<float>* logits) -> Status, logits [out_rows][vocab].
// InvalidArgument for an empty batch, a count mismatch or a sequence given
// twice; check's error for a bad sequence or ids; nothing runs then.
// With `all_rows` (null: none), sequence i whose all_rows[i] is set gets
// the logits of every one of its rows, [ids[i].size()][vocab].
template <class State, class Check, class Step>
absl::Status RunBatchedStep(const std::vector<ModelSequence*>& sequences,
                            const std::vector<std::vector<int32_t>>& ids,
                            size_t vocab, Check check, Step step,
                            std::vector<std::vector<float>>* last_logits,
                            const std::vector<bool>* all_rows = nullptr) {
  if (sequences.size() != ids.size()) {
    return absl::InvalidArgumentError("one id list per sequence");
  }
  if (sequences.empty()) return absl::InvalidArgumentError("no sequences");
  std::vector<State*> states;
  std::vector<const std::vector<int32_t>*> lists;
  std::vector<size_t> last_rows;
  size_t rows = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    FLOTILLA_ASSIGN_OR_RETURN(State * state, check(sequences[i], ids[i]));
    for (const State* seen : states) {
      if (seen == state) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequence ", i, " appears twice in one step"));
      }
    }
    states.push_back(state);
    lists.push_back(&ids[i]);
    const bool every = all_rows != nullptr && (*all_rows)[i];
    for (size_t r = every ? 0 : ids[i].size() - 1; r < ids[i].size(); ++r) {
      last_rows.push_back(rows + r);
    }
    rows += ids[i].size();
  }
  std::vector<float> logits;
  FLOTILLA_RETURN_IF_ERROR(step(states, lists, last_rows, &logits));
  last_logits->resize(states.size());
  size_t at = 0;
  for (size_t i = 0; i < states.size(); ++i) {
    const size_t n = all_rows != nullptr && (*all_rows)[i] ? ids[i].size() : 1;
    (*last_logits)[i].assign(logits.begin() + at * vocab,
                             logits.begin() + (at + n) * vocab);
    at += n;
  }
  return absl::OkStatus();
}

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_BATCHED_STEP_H_
