// Text generation over any LanguageModel: one batched prefill of the whole
// prompt, then incremental decode carrying the sequence state, with greedy or
// seeded sampling and stop tokens.
#ifndef FLOTILLA_COORDINATOR_GENERATE_H_
#define FLOTILLA_COORDINATOR_GENERATE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/model/language_model.h"
#include "coordinator/sampler.h"

namespace flotilla::coordinator {

// Restricts which tokens may come next (constrained decoding: JSON that
// must parse and match a schema). Used by one sequence, on the thread that
// samples it.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets to -infinity the logits of the tokens that may not come next, when
  // `remaining` tokens (this one included) may still be generated.
  virtual void Mask(float* logits, int vocab, int remaining) = 0;
  // Takes the token chosen; true when the constrained output is complete
  // (the generation then ends with finish_reason "stop").
  virtual bool Accept(int32_t id) = 0;
};

class Drafter;

struct GenerateOptions {
  int max_tokens = 16;            // >= 0 new tokens at most
  SamplerOptions sampler;         // temperature 0 = greedy
  std::vector<int32_t> stop_ids;  // generation ends after one of these
  bool keep_logits = false;       // fill GenerateResult::logits
  // Tokens per prefill forward pass (0 = the whole prompt at once). Results
  // do not depend on it: every token's arithmetic is the same whatever the
  // batch it runs in.
  int prefill_chunk = 0;
  // Set: tokens are chosen from those it allows (null: any).
  std::shared_ptr<TokenConstraint> constraint;
  // Speculative decoding (speculate.h): "" off, or a drafter's name
  // ("ngram"); up to draft_tokens guesses checked per forward pass. The
  // output is the same either way.
  std::string speculate;
  int draft_tokens = 4;
  // False: draft on every pass, even while guessing costs more than plain
  // passes (`--speculate-always`; benches, and tests whose outcome must not
  // hang on timings). The tokens are the same either way.
  bool speculate_pay_check = true;
  // Set: this drafter, whatever `speculate` says (tests and benches: one
  // that replays a known run, or always guesses wrong).
  std::shared_ptr<Drafter> drafter;
};

struct GenerateResult {
  std::vector<int32_t> generated_ids;
  // [generated_ids.size()][vocab]: row s holds the logits that chose token s.
  std::vector<float> logits;
  std::string finish_reason;  // "length" or "stop"
  double prefill_seconds = 0;
  double decode_seconds = 0;         // all decode steps together
  std::vector<double> step_seconds;  // each decode forward pass
  size_t state_bytes = 0;            // sequence state at the end
  // serve: prompt tokens resumed from a kept state (the prefix cache), not
  // prefilled.
  size_t cached_prompt_tokens = 0;
  // Speculative decoding: forward passes that checked guesses, guesses
  // checked, guesses kept, and passes spent restoring a state that could
  // not be truncated.
  int speculative_passes = 0;
  int drafted_tokens = 0;
  int accepted_tokens = 0;
  int replay_passes = 0;
};

// Called after each new token; return false to stop early.
using TokenCallback = std::function<bool(int32_t id)>;

// What every generation checks before it runs: a prompt, max_tokens >= 0,
// valid sampler options. InvalidArgument naming the field.
absl::Status CheckGenerateRequest(const std::vector<int32_t>& prompt,
                                  const GenerateOptions& options);

// The step after a forward pass gave a sequence's `logits`: samples the next
// token, appends it (and, with keep_logits, the logits) to `result`, reports
// it to `on_token`, and returns whether the generation ended: on_token
// declined it, it is a stop id (finish_reason "stop"), or max_tokens are
// reached. Generate and the serving loop both decide through it, so a
// served request ends exactly where Generate ends.
bool AcceptToken(const float* logits, int vocab, const GenerateOptions& options,
                 Sampler* sampler, const TokenCallback& on_token,
                 GenerateResult* result);

// A speculative pass in two halves around its forward, which a caller may
// batch with other sequences (the serving queue, ForwardBatchRows): the
// guesses and the ids to feed, then what the logits of those ids (every
// row when there are guesses, else the one) say.
struct SpeculativePlan {
  std::vector<int32_t> drafts;
  std::vector<int32_t> ids;  // the newest token, then the guesses
  size_t held = 0;           // positions the state held before the pass
  size_t produced_before = 0;
  // A copy of the state, for one that cannot truncate back (else null).
  std::unique_ptr<ModelSequence> before;
  std::chrono::steady_clock::time_point start;
};
SpeculativePlan PlanSpeculativePass(const std::vector<int32_t>& history,
                                    const GenerateOptions& options,
                                    Drafter& drafter, ModelSequence* state,
                                    const GenerateResult& result);
// Returns whether the generation ended.
absl::StatusOr<bool> FinishSpeculativePass(
    LanguageModel& model, SpeculativePlan& plan,
    const std::vector<float>& logits, const GenerateOptions& options,
    Drafter& drafter, Sampler* sampler, const TokenCallback& on_token,
    std::unique_ptr<ModelSequence>* state, GenerateResult* result);

// One speculative pass (speculative_decode.cc): `history` is the prompt and
// every token chosen so far, `*state` holds all of it but the newest; the
// drafter's guesses are checked in one forward, the kept tokens go to
// `result` through AcceptToken, and the state is left holding all but the
// newest again. Returns whether the generation ended.
absl::StatusOr<bool> SpeculativeStep(LanguageModel& model,
                                     const std::vector<int32_t>& history,
                                     const GenerateOptions& options,
                                     Drafter& drafter, Sampler* sampler,
                                     const TokenCallback& on_token,
                                     std::unique_ptr<ModelSequence>* state,
                                     GenerateResult* result);

// The decode loop with speculation (speculative_decode.cc): `logits` are
// the last prompt position's, `*state` holds the prompt. Fills `result` as
// the plain loop does, plus the speculative counters.
absl::Status DecodeSpeculatively(
    LanguageModel& model, const std::vector<int32_t>& prompt,
    const GenerateOptions& options, Drafter& drafter,
    const std::vector<float>& logits, Sampler* sampler,
    const TokenCallback& on_token, std::unique_ptr<ModelSequence>* state,
    GenerateResult* result);

absl::StatusOr<GenerateResult> Generate(LanguageModel& model,
                                        const std::vector<int32_t>& prompt,
                                        const GenerateOptions& options,
                                        const TokenCallback& on_token);

// Parses "1,2,3" (spaces allowed) into ids; InvalidArgument naming the bad
// item.
absl::StatusOr<std::vector<int32_t>> ParseIdList(const std::string& text);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_GENERATE_H_
