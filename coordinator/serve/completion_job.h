// One completion as the servers see it: the job handed to the
// GenerationQueue and the stream of what it produces. The queue's thread
// decodes tokens to text (StreamDecoder, primed with the prompt so the
// first piece keeps its leading space), applies stop strings, and appends
// pieces; the HTTP or gRPC thread takes them as they come. A consumer that
// goes away calls Cancel(), and the job stops at its next token.
#ifndef FLOTILLA_COORDINATOR_SERVE_COMPLETION_JOB_H_
#define FLOTILLA_COORDINATOR_SERVE_COMPLETION_JOB_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/sampler.h"
#include "coordinator/serve/completion_request.h"
#include "coordinator/serve/generation_queue.h"
#include "coordinator/serve/serve_metrics.h"
#include "coordinator/serve/stop_text.h"
#include "shared/tokenizer/stream_decoder.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::coordinator::serve {

struct CompletionSpec {
  std::vector<int32_t> prompt;  // non-empty, inside the vocabulary
  int max_tokens = 16;
  // false: max_tokens is the server's default, which FitDefaultMaxTokens
  // cuts to what the context leaves after the prompt.
  bool max_tokens_given = true;
  SamplerOptions sampler;
  std::vector<std::string> stop;  // stop strings
  std::vector<int32_t> stop_ids;  // besides the tokenizer's end of text
  bool ignore_eos = false;        // the tokenizer's end of text stops nothing
  // >= 0: report each token's log-probability and this many most likely
  // alternatives (log-softmax of the raw logits, before temperature).
  int top_logprobs = -1;
  bool tokens_as_ids = false;  // logprobs name tokens "token_id:N"
  absl::Duration timeout = absl::InfiniteDuration();
  // The timeout is the server's (--request-timeout-s): reaching it ends the
  // completion like max_tokens does (finish_reason "length", the text so
  // far). false (a gRPC client's own deadline): it fails, DEADLINE_EXCEEDED.
  bool timeout_is_a_length = true;
  // Set: constrained decoding (null: free output).
  std::shared_ptr<TokenConstraint> constraint;
};

// One token (chosen or an alternative) with its log-probability and its
// text as it reads after the previous token (so a SentencePiece word keeps
// its leading space); "token_id:N" without a tokenizer.
struct TokenChoice {
  int32_t id = 0;
  float logprob = 0;
  std::string text;
};

// One generated token and its most likely alternatives (most likely first).
struct TokenLogprob {
  TokenChoice token;
  std::vector<TokenChoice> top;
};

// A request's prompt and length checked against the model and the limits,
// the same for every front end: a non-empty prompt of at most
// max_prompt_tokens ids inside [0, vocab_size), max_tokens in
// 1..limits.max_tokens, and prompt + max_tokens within max_context (the
// state the request may grow to was charged to the memory budget for that
// many positions). InvalidArgument naming what is wrong.
absl::Status CheckCompletionSpec(const CompletionSpec& spec, int vocab_size,
                                 const RequestLimits& limits);
// max_tokens, the server's default or the request's own, cut to the
// positions the prompt leaves in the context: a cap, not a refusal
// (llama-server does the same; agents ask for 32000 on every request).
void FitDefaultMaxTokens(CompletionSpec* spec, const RequestLimits& limits);

// New output since the last Take.
struct CompletionPiece {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<TokenLogprob> logprobs;  // one per id when asked for
};

class Completion {
 public:
  // Queues the job. ResourceExhausted when the queue is full.
  // `metrics` (may be null) receives the time between tokens.
  static absl::StatusOr<std::shared_ptr<Completion>> Start(
      GenerationQueue* queue, const tokenizer::Tokenizer* tokenizer,
      CompletionSpec spec, ServeMetrics* metrics = nullptr);

  // Blocks until there is new output or the job ended; returns whether it
  // ended (then `piece` holds the last output, if any).
  bool Take(CompletionPiece* piece);
  // After Take returned true:
  absl::Status status() const;
  std::string finish_reason() const;  // "stop" or "length"
  // The stop string that ended the output (empty: another end).
  std::string stop_sequence() const;
  size_t prompt_tokens() const { return prompt_tokens_; }
  // Of those, how many were resumed from the prefix cache (known once the
  // request ended; 0 before).
  size_t cached_tokens() const;
  size_t completion_tokens() const;
  // From Start to the first token (0 before it), and to now.
  double ttft_seconds() const;
  double elapsed_seconds() const;

  void Cancel() { cancelled_ = true; }

 private:
  Completion() = default;
  bool OnToken(int32_t id);
  void OnLogits(const float* logits, int vocab);
  TokenChoice Choice(int32_t id) const;
  void OnDone(absl::StatusOr<GenerateResult> result);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  CompletionPiece pending_;
  bool done_ = false;
  size_t cached_tokens_ = 0;
  bool timeout_is_a_length_ = true;
  absl::Status status_;
  std::string finish_reason_ = "length";
  size_t prompt_tokens_ = 0, completion_tokens_ = 0;
  std::atomic<bool> cancelled_{false};
  std::unique_ptr<tokenizer::StreamDecoder> decoder_;  // null: no tokenizer
  std::unique_ptr<StopText> stop_;
  int top_logprobs_ = -1;
  ServeMetrics* metrics_ = nullptr;
  absl::Time started_;
  absl::Time first_token_, last_token_;  // guarded by mu_ (InfinitePast: none)
  const tokenizer::Tokenizer* tokenizer_ = nullptr;
  int32_t previous_id_ = -1;  // the last id fed, for token texts
  // The last step's log-softmax (queue thread only, when logprobs are on).
  std::vector<float> log_probs_;
};

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_COMPLETION_JOB_H_
