// What every decoder family's LanguageModel does the same way around its own
// step: checking that a sequence is its own and that the ids fit the
// vocabulary and the context, Forward over one sequence (the last row's or
// every row's logits) and ForwardBatch over several (batched_step.h). A
// family derives from DecoderModel<ItsSequence> and writes Step.
#ifndef FLOTILLA_COORDINATOR_MODEL_DECODER_MODEL_H_
#define FLOTILLA_COORDINATOR_MODEL_DECODER_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/model/batched_step.h"
#include "coordinator/model/language_model.h"
#include "shared/base/status_macros.h"

namespace flotilla::coordinator {

template <class Sequence>
class DecoderModel : public LanguageModel {
 public:
  int vocab_size() const override { return vocab_size_; }
  int max_positions() const override { return max_positions_; }

  absl::Status Forward(ModelSequence* sequence, const std::vector<int32_t>& ids,
                       bool all_positions,
                       std::vector<float>* logits) override {
    FLOTILLA_ASSIGN_OR_RETURN(Sequence * seq, CheckInput(sequence, ids));
    std::vector<size_t> rows;
    for (size_t r = all_positions ? 0 : ids.size() - 1; r < ids.size(); ++r) {
      rows.push_back(r);
    }
    return Step({seq}, {&ids}, rows, logits);
  }

  // Each layer acquired once and each MoE layer's experts in one backend
  // call for every sequence's rows; attention stays per sequence.
  absl::Status ForwardBatch(
      const std::vector<ModelSequence*>& sequences,
      const std::vector<std::vector<int32_t>>& ids,
      std::vector<std::vector<float>>* last_logits) override {
    return ForwardBatchRows(sequences, ids,
                            std::vector<bool>(sequences.size(), false),
                            last_logits);
  }

  absl::Status ForwardBatchRows(
      const std::vector<ModelSequence*>& sequences,
      const std::vector<std::vector<int32_t>>& ids,
      const std::vector<bool>& all_rows,
      std::vector<std::vector<float>>* last_logits) override {
    if (all_rows.size() != sequences.size()) {
      return absl::InvalidArgumentError("one all_rows flag per sequence");
    }
    return RunBatchedStep<Sequence>(
        sequences, ids, vocab_size_,
        [this](ModelSequence* s, const std::vector<int32_t>& i) {
          return CheckInput(s, i);
        },
        [this](const std::vector<Sequence*>& seqs,
               const std::vector<const std::vector<int32_t>*>& lists,
               const std::vector<size_t>& rows, std::vector<float>* logits) {
          return Step(seqs, lists, rows, logits);
        },
        last_logits, &all_rows);
  }

 protected:
  // `name` for errors ("DeepSeek-V3"); the config's vocabulary and
  // max_position_embeddings.
  DecoderModel(std::string name, int vocab_size, int max_positions)
      : name_(std::move(name)),
        vocab_size_(vocab_size),
        max_positions_(max_positions) {}

  // One step of seqs[i] over *ids[i] (rows concatenated in that order);
  // `logits` gets [out_rows.size()][vocab] for the listed rows.
  virtual absl::Status Step(const std::vector<Sequence*>& seqs,
                            const std::vector<const std::vector<int32_t>*>& ids,
                            const std::vector<size_t>& out_rows,
                            std::vector<float>* logits) = 0;

 private:
  absl::StatusOr<Sequence*> CheckInput(ModelSequence* sequence,
                                       const std::vector<int32_t>& ids) const {
    auto* seq = dynamic_cast<Sequence*>(sequence);
    if (seq == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the sequence was not started by this ", name_, " model"));
    }
    FLOTILLA_RETURN_IF_ERROR(CheckTokenIds(ids, vocab_size_));
    if (seq->positions + ids.size() > static_cast<size_t>(max_positions_)) {
      return absl::OutOfRangeError(absl::StrCat(
          "the sequence would reach ", seq->positions + ids.size(),
          " tokens; the model's context (max_position_embeddings) is ",
          max_positions_));
    }
    return seq;
  }

  std::string name_;
  int vocab_size_ = 0;
  int max_positions_ = 0;
};

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_MODEL_DECODER_MODEL_H_
