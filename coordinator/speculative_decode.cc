// The speculative decode loop (speculate.h explains why it is exact).
#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "coordinator/generate.h"
#include "coordinator/speculate.h"
#include "shared/base/elapsed.h"
#include "shared/base/status_macros.h"

namespace flotilla::coordinator {

absl::StatusOr<bool> SpeculativeStep(LanguageModel& model,
                                     const std::vector<int32_t>& history,
                                     const GenerateOptions& options,
                                     Drafter& drafter, Sampler* sampler,
                                     const TokenCallback& on_token,
                                     std::unique_ptr<ModelSequence>* state,
                                     GenerateResult* result) {
  const int vocab = model.vocab_size();
  const std::vector<int32_t>& out = result->generated_ids;
  const size_t held = history.size() - 1;  // all but the newest token
  // A pass feeds the last token and the guesses, never past what plain
  // decoding would feed before max_tokens.
  const int room = options.max_tokens - static_cast<int>(out.size()) - 1;
  const size_t produced_before = out.size();
  const auto pass_start = std::chrono::steady_clock::now();
  std::vector<int32_t> drafts;
  if (room > 0) {
    drafts = drafter.Draft(history, std::min(options.draft_tokens, room));
  }
  std::vector<int32_t> ids = {history.back()};
  ids.insert(ids.end(), drafts.begin(), drafts.end());
  // The state before the pass, for a state that cannot truncate.
  std::unique_ptr<ModelSequence> before =
      drafts.empty() || (*state)->PrepareUndo(ids.size()) ? nullptr
                                                          : (*state)->Clone();
  std::vector<float> logits;
  FLOTILLA_RETURN_IF_ERROR(base::WithContext(
      model.Forward(state->get(), ids, !drafts.empty(), &logits),
      absl::StrCat("decode step at token ", out.size())));
  result->step_seconds.push_back(base::SecondsSince(pass_start));
  // Row i chose the token after ids[0..i]; keep guesses while they are
  // what the model picks.
  size_t kept = 0;
  bool done = false;
  for (size_t i = 0; i < ids.size(); ++i) {
    done = AcceptToken(logits.data() + i * vocab, vocab, options, sampler,
                       on_token, result);
    if (done || i == drafts.size() || out.back() != drafts[i]) break;
    ++kept;
  }
  if (!drafts.empty()) {
    ++result->speculative_passes;
    result->drafted_tokens += static_cast<int>(drafts.size());
    result->accepted_tokens += static_cast<int>(kept);
  }
  // Reported before a replay, which the next pass's time then includes.
  drafter.Outcome(static_cast<int>(drafts.size()),
                  static_cast<int>(out.size() - produced_before),
                  base::SecondsSince(pass_start));
  if (done || kept == drafts.size()) return done;  // every fed token stays
  if ((*state)->Truncate(held + 1 + kept)) return false;
  if (before == nullptr) {
    return absl::InternalError(
        absl::StrCat("the sequence promised to truncate back to ",
                     held + 1 + kept, " positions and could not"));
  }
  *state = std::move(before);
  const std::vector<int32_t> replay(ids.begin(), ids.begin() + kept + 1);
  ++result->replay_passes;
  FLOTILLA_RETURN_IF_ERROR(base::WithContext(
      model.Forward(state->get(), replay, false, &logits),
      absl::StrCat("restoring the state at token ", out.size())));
  return false;
}

absl::Status DecodeSpeculatively(
    LanguageModel& model, const std::vector<int32_t>& prompt,
    const GenerateOptions& options, Drafter& drafter,
    const std::vector<float>& prefill_logits, Sampler* sampler,
    const TokenCallback& on_token, std::unique_ptr<ModelSequence>* state,
    GenerateResult* result) {
  const int vocab = model.vocab_size();
  if (options.max_tokens == 0) return absl::OkStatus();
  if (AcceptToken(prefill_logits.data(), vocab, options, sampler, on_token,
                  result)) {
    return absl::OkStatus();
  }
  std::vector<int32_t> history = prompt;
  for (;;) {
    history.resize(prompt.size());
    history.insert(history.end(), result->generated_ids.begin(),
                   result->generated_ids.end());
    FLOTILLA_ASSIGN_OR_RETURN(
        const bool done, SpeculativeStep(model, history, options, drafter,
                                         sampler, on_token, state, result));
    if (done) return absl::OkStatus();
  }
}

}  // namespace flotilla::coordinator
