// Speculative decoding, exact (issue 35): a drafter guesses the next few
// tokens, one forward pass over the last token and the guesses gives every
// guessed position's logits, and a guess is kept only while it equals the
// token the model itself chooses there (AcceptToken, the same sampler,
// constraint and stop rules as plain decoding, drawing in the same order).
// The output is therefore the plain output, greedy or sampled; a pass that
// keeps m guesses yields m + 1 tokens for one read of the weights.
//
// After a pass the sequence holds every guessed position; the rejected
// ones are dropped (ModelSequence::Truncate where the state allows it, else
// the state from before the pass is restored and the kept tokens fed again,
// which costs a second pass).
#ifndef FLOTILLA_COORDINATOR_SPECULATE_H_
#define FLOTILLA_COORDINATOR_SPECULATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flotilla::coordinator {

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to `max_tokens` guesses at what follows `history` (prompt and
  // output so far); none when it has no guess (a plain step follows).
  virtual std::vector<int32_t> Draft(const std::vector<int32_t>& history,
                                     int max_tokens) = 0;
  // How the pass after a Draft went: the guesses it checked (0: a plain
  // step), the tokens it produced, and its seconds, the drafting included.
  virtual void Outcome(int drafted, int produced, double seconds) {
    (void)drafted, (void)produced, (void)seconds;
  }
};

// The default around a drafter (`--speculate ngram`, `--draft-model`):
// drafting goes on only while it pays. It compares the seconds per
// produced token of passes with guesses against plain passes (running
// averages), pauses drafting for a while when guessing costs more, and
// keeps measuring both (a plain pass now and then while drafting, a
// guessing pass now and then while paused). The tokens never change; only
// how fast they come.
class PayingDrafter : public Drafter {
 public:
  explicit PayingDrafter(std::shared_ptr<Drafter> inner)
      : inner_(std::move(inner)) {}
  std::vector<int32_t> Draft(const std::vector<int32_t>& history,
                             int max_tokens) override;
  void Outcome(int drafted, int produced, double seconds) override;
  bool paused() const { return paused_; }

 private:
  std::shared_ptr<Drafter> inner_;
  // Seconds per produced token, passes with guesses and plain ones
  // (exponential averages; < 0: not measured yet).
  double guessing_ = -1, plain_ = -1;
  bool paused_ = false;
  int passes_ = 0;
};

// Prompt lookup: the longest suffix of the history (max_ngram tokens down
// to min_ngram) that occurred earlier, its latest earlier occurrence, and
// the tokens that followed it there. No model; pays on text that repeats
// its context (code edits, quoting, lists, structured output).
class NgramDrafter : public Drafter {
 public:
  NgramDrafter(int max_ngram = 3, int min_ngram = 1)
      : max_ngram_(max_ngram), min_ngram_(min_ngram) {}
  std::vector<int32_t> Draft(const std::vector<int32_t>& history,
                             int max_tokens) override;

 private:
  int max_ngram_, min_ngram_;
};

// For benches and tests: guesses the continuation of a recorded run (its
// prompt and output ids), the first `right` guesses of every pass as
// recorded and the rest deliberately wrong, so each pass keeps exactly
// min(right, guesses) of them. No guess once the history leaves the record.
class ReplayDrafter : public Drafter {
 public:
  ReplayDrafter(std::vector<int32_t> record, int right)
      : record_(std::move(record)), right_(right) {}
  std::vector<int32_t> Draft(const std::vector<int32_t>& history,
                             int max_tokens) override;

 private:
  std::vector<int32_t> record_;
  int right_;
};

// The drafter named by `--speculate`: "ngram" (inside a PayingDrafter), or
// (benches) "replay:FILE:K"
// with FILE a `generate --json` output whose run is replayed keeping K
// guesses per pass. InvalidArgument naming the problem otherwise.
// `pay_check` false: "ngram" without the PayingDrafter (it drafts on
// every pass whatever the timings say; `--speculate-always`).
absl::StatusOr<std::unique_ptr<Drafter>> MakeDrafter(const std::string& name,
                                                     bool pay_check = true);

}  // namespace flotilla::coordinator

#endif  // FLOTILLA_COORDINATOR_SPECULATE_H_
