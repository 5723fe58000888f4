// The speculative decode loop (speculate.h explains why it is exact).
#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "coordinator/generate.h"
#include "coordinator/speculate.h"
#include "shared/base/elapsed.h"
#include "shared/base/status_macros.h"

namespace flotilla::coordinator {

SpeculativePlan PlanSpeculativePass(const std::vector<int32_t>& history,
                                    const GenerateOptions& options,
                                    Drafter& drafter, ModelSequence* state,
                                    const GenerateResult& result) {
  SpeculativePlan p;
  p.start = std::chrono::steady_clock::now();
  p.held = history.size() - 1;  // all but the newest token
  p.produced_before = result.generated_ids.size();
  // A pass feeds the last token and the guesses, never past what plain
  // decoding would feed before max_tokens.
  const int room = options.max_tokens - static_cast<int>(p.produced_before) - 1;
  if (room > 0) {
    p.drafts = drafter.Draft(history, std::min(options.draft_tokens, room));
  }
  p.ids = {history.back()};
  p.ids.insert(p.ids.end(), p.drafts.begin(), p.drafts.end());
  // The state before the pass, for a state that cannot truncate.
  if (!p.drafts.empty() && !state->PrepareUndo(p.ids.size())) {
    p.before = state->Clone();
  }
  return p;
}

absl::StatusOr<bool> FinishSpeculativePass(
    LanguageModel& model, SpeculativePlan& p, const std::vector<float>& logits,
    const GenerateOptions& options, Drafter& drafter, Sampler* sampler,
    const TokenCallback& on_token, std::unique_ptr<ModelSequence>* state,
    GenerateResult* result) {
  const int vocab = model.vocab_size();
  const std::vector<int32_t>& out = result->generated_ids;
  // Row i chose the token after ids[0..i]; keep guesses while they are
  // what the model picks.
  size_t kept = 0;
  bool done = false;
  for (size_t i = 0; i < p.ids.size(); ++i) {
    done = AcceptToken(logits.data() + i * vocab, vocab, options, sampler,
                       on_token, result);
    if (done || i == p.drafts.size() || out.back() != p.drafts[i]) break;
    ++kept;
  }
  if (!p.drafts.empty()) {
    ++result->speculative_passes;
    result->drafted_tokens += static_cast<int>(p.drafts.size());
    result->accepted_tokens += static_cast<int>(kept);
  }
  const double seconds = base::SecondsSince(p.start);
  result->step_seconds.push_back(seconds);
  // Reported before a replay, which the next pass's time then includes.
  drafter.Outcome(static_cast<int>(p.drafts.size()),
                  static_cast<int>(out.size() - p.produced_before), seconds);
  if (done || kept == p.drafts.size()) return done;  // every fed token stays
  if ((*state)->Truncate(p.held + 1 + kept)) return false;
  if (p.before == nullptr) {
    return absl::InternalError(
        absl::StrCat("the sequence promised to truncate back to ",
                     p.held + 1 + kept, " positions and could not"));
  }
  *state = std::move(p.before);
  const std::vector<int32_t> replay(p.ids.begin(), p.ids.begin() + kept + 1);
  ++result->replay_passes;
  std::vector<float> unused;
  FLOTILLA_RETURN_IF_ERROR(base::WithContext(
      model.Forward(state->get(), replay, false, &unused),
      absl::StrCat("restoring the state at token ", out.size())));
  return false;
}

absl::StatusOr<bool> SpeculativeStep(LanguageModel& model,
                                     const std::vector<int32_t>& history,
                                     const GenerateOptions& options,
                                     Drafter& drafter, Sampler* sampler,
                                     const TokenCallback& on_token,
                                     std::unique_ptr<ModelSequence>* state,
                                     GenerateResult* result) {
  SpeculativePlan p =
      PlanSpeculativePass(history, options, drafter, state->get(), *result);
  std::vector<float> logits;
  FLOTILLA_RETURN_IF_ERROR(base::WithContext(
      model.Forward(state->get(), p.ids, !p.drafts.empty(), &logits),
      absl::StrCat("decode step at token ", result->generated_ids.size())));
  return FinishSpeculativePass(model, p, logits, options, drafter, sampler,
                               on_token, state, result);
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
