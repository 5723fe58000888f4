#include "coordinator/draft_model.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::coordinator {
namespace {

// The tokenizer of a model folder, or null when it has none.
absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> TokenizerOf(
    const std::string& dir) {
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> t =
      tokenizer::Tokenizer::LoadDir(dir);
  if (absl::IsNotFound(t.status())) {
    return std::unique_ptr<tokenizer::Tokenizer>();
  }
  return t;
}

}  // namespace

absl::Status CheckDraftTokenizer(const std::string& model_dir,
                                 const std::string& draft_dir) {
  FLOTILLA_ASSIGN_OR_RETURN(auto model, TokenizerOf(model_dir));
  FLOTILLA_ASSIGN_OR_RETURN(auto draft, TokenizerOf(draft_dir));
  auto differ = [](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--draft-model: ", why,
                     "; a draft model must share the model's tokenizer"));
  };
  if ((model == nullptr) != (draft == nullptr)) {
    return differ(model == nullptr ? "it has a tokenizer and the model none"
                                   : "it has no tokenizer and the model one");
  }
  if (model == nullptr) return absl::OkStatus();
  if (model->vocab_size() != draft->vocab_size()) {
    return differ(absl::StrCat("its tokenizer has ", draft->vocab_size(),
                               " tokens and the model's ",
                               model->vocab_size()));
  }
  for (int32_t id = 0; id < model->vocab_size(); ++id) {
    const absl::StatusOr<std::string> a = model->Decode({id});
    const absl::StatusOr<std::string> b = draft->Decode({id});
    if (a.ok() != b.ok() || (a.ok() && *a != *b)) {
      return differ(absl::StrCat(
          "token ", id, " is ", a.ok() ? absl::CHexEscape(*a) : "unknown",
          " in the model and ", b.ok() ? absl::CHexEscape(*b) : "unknown",
          " in the draft"));
    }
  }
  if (model->StopIds() != draft->StopIds()) {
    return differ("its stop tokens differ from the model's");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ModelDrafter>> ModelDrafter::Create(
    std::unique_ptr<Engine> draft, int vocab_size) {
  const int draft_vocab = draft->model->vocab_size();
  if (draft_vocab != vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("--draft-model: its vocabulary has ", draft_vocab,
                     " tokens and the model's ", vocab_size,
                     "; a draft model must share the model's tokenizer"));
  }
  return std::unique_ptr<ModelDrafter>(new ModelDrafter(std::move(draft)));
}

std::vector<int32_t> ModelDrafter::Draft(const std::vector<int32_t>& history,
                                         int max_tokens) {
  std::vector<int32_t> out;
  if (!status_.ok()) return out;
  status_ = Guess(history, max_tokens, &out);
  if (!status_.ok()) out.clear();
  return out;
}

absl::Status ModelDrafter::Guess(const std::vector<int32_t>& history,
                                 int max_tokens, std::vector<int32_t>* out) {
  LanguageModel& model = *engine_->model;
  // Back to the longest prefix of what was fed that is still the history.
  const size_t common =
      std::mismatch(fed_.begin(), fed_.end(), history.begin(), history.end())
          .first -
      fed_.begin();
  if (state_ == nullptr ||
      (common < fed_.size() && !state_->Truncate(common))) {
    state_ = model.StartSequence();
    fed_.clear();
  } else {
    fed_.resize(common);
  }
  if (fed_.size() < history.size()) {
    const std::vector<int32_t> fresh(history.begin() + fed_.size(),
                                     history.end());
    FLOTILLA_RETURN_IF_ERROR(
        model.Forward(state_.get(), fresh, false, &logits_));
    fed_ = history;
  }
  if (logits_.empty()) return absl::OkStatus();
  // Greedy guesses (ties to the lower id), then the guesses dropped again.
  // They take one forward each, which PrepareUndo does not cover: a copy
  // of the small draft state is kept for states that cannot truncate.
  std::unique_ptr<ModelSequence> before =
      max_tokens > 1 ? state_->Clone() : nullptr;
  std::vector<float> logits = logits_;
  const int vocab = model.vocab_size();
  for (int i = 0; i < max_tokens; ++i) {
    const int32_t id = static_cast<int32_t>(
        std::max_element(logits.begin(), logits.begin() + vocab) -
        logits.begin());
    out->push_back(id);
    if (i + 1 < max_tokens) {
      FLOTILLA_RETURN_IF_ERROR(
          model.Forward(state_.get(), {id}, false, &logits));
    }
  }
  if (max_tokens > 1 && !state_->Truncate(fed_.size())) {
    state_ = std::move(before);
  }
  return absl::OkStatus();
}

}  // namespace flotilla::coordinator
