// The serving loop: a bounded queue of generation jobs and one thread that
// owns the model and steps up to `max_batch` of them together (continuous
// batching). Every step is one LanguageModel::ForwardBatch: the next chunk
// (at most `prefill_chunk` tokens) of each admitted job's prompt and the
// last token of each decoding one, so a layer's weights and experts are
// read once per step for the whole batch and a long prompt never stalls
// the others' decoding for more than a chunk. A job
// joins at the next step after it arrives and leaves (freeing its state) as
// soon as it ends; results are bitwise those of running it alone
// (ForwardBatch's contract), so what else is in the batch never matters.
// A full queue is refused at once (HTTP 429), never blocks; a job whose
// client went away is cancelled at its next token.
#ifndef FLOTILLA_COORDINATOR_SERVE_GENERATION_QUEUE_H_
#define FLOTILLA_COORDINATOR_SERVE_GENERATION_QUEUE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/generate.h"
#include "coordinator/model/language_model.h"
#include "coordinator/serve/prefix_cache.h"
#include "coordinator/serve/prefix_store.h"

namespace flotilla::coordinator::serve {

struct GenerationJob {
  std::vector<int32_t> prompt;
  GenerateOptions options;
  // On the queue's thread, after each token; false cancels the job.
  std::function<bool(int32_t id)> on_token;
  // On the queue's thread, once, when the job ends (also for a failure).
  std::function<void(absl::StatusOr<GenerateResult>)> on_done;
  // On the queue's thread, with each step's logits, before the token is
  // chosen (for log-probabilities); may be empty.
  std::function<void(const float* logits, int vocab)> on_logits;
  // Checked before every step (and before admission): true ends the job
  // with Cancelled, its state freed, without running another step.
  std::function<bool()> cancelled;
  // Past it the job ends with DeadlineExceeded at the next step.
  absl::Time deadline = absl::InfiniteFuture();
};

// What one step did, for metrics (on the queue's thread, after the step).
struct StepReport {
  size_t sequences = 0;  // in the forward pass
  size_t tokens = 0;     // tokens generated
  // A speculative pass (one sequence alone): guesses checked and kept.
  size_t drafted = 0;
  size_t accepted = 0;
  size_t prompt_tokens = 0;  // prompt tokens fed (0: a pure decode step)
  double seconds = 0;        // the forward pass's wall time
  size_t waiting = 0;        // jobs waiting after the step
  size_t running = 0;        // jobs still running after it
  size_t prefix_hits = 0;    // jobs admitted since the last report that
  size_t reused_tokens = 0;  // resumed from a kept state, and tokens skipped
};

struct QueueOptions {
  size_t max_queue = 64;  // jobs that may wait (>= 1)
  size_t max_batch = 8;   // jobs stepped together (>= 1)
  // > 0: the states of ended jobs are kept up to this many bytes
  // (PrefixCache) and later prompts that extend one resume from it.
  uint64_t prefix_cache_bytes = 0;
  size_t prefill_chunk = 256;  // prompt tokens per job per step (0: all)
  // Set: ended jobs' states are also kept on disk (--prefix-cache-dir) and
  // later prompts resume from there, across restarts.
  std::shared_ptr<PrefixStore> prefix_store;
  std::function<void(const StepReport&)> on_step;  // may be empty
  // Set (`serve --speculate ngram`): decoding jobs check this drafter's
  // guesses in the batched step (speculate.h: the tokens are the same).
  // Shared by every job: the n-gram drafter (inside its PayingDrafter).
  std::shared_ptr<Drafter> drafter;
  int draft_tokens = 4;
  // When the batch empties without a step (every running job was
  // cancelled or ran out of time), with the jobs waiting; may be empty.
  std::function<void(size_t waiting)> on_idle;
};

class GenerationQueue {
 public:
  // `model` must outlive the queue.
  GenerationQueue(LanguageModel* model, const QueueOptions& options);
  ~GenerationQueue();  // runs every queued job to its end first

  // ResourceExhausted when `max_queue` jobs already wait; Unavailable after
  // Shutdown. A job with a bad prompt or sampler ends at once through
  // on_done with the error.
  absl::Status Submit(GenerationJob job);
  // Stops taking jobs; waiting ones still run (graceful drain).
  void Shutdown();
  size_t waiting() const;
  // Most jobs that ran in one step so far (for tests and /readyz).
  size_t widest_step() const;
  // Jobs that resumed from a kept state, and the prompt tokens they skipped.
  uint64_t prefix_hits() const;
  uint64_t reused_tokens() const;
  // Jobs ended because their client went away, and jobs in the batch now.
  uint64_t cancelled_jobs() const;
  size_t running() const;

 private:
  struct Running;
  void Loop();
  // Moves waiting jobs into `running` while there is room; false when the
  // loop should end (stopping, nothing waiting or running).
  bool Admit(std::vector<std::unique_ptr<Running>>* running);
  // Cancelled or DeadlineExceeded when the job must end now, else OK.
  static absl::Status Interrupted(const GenerationJob& job);
  // One ForwardBatch over `running`; ends the jobs that finish.
  void Step(std::vector<std::unique_ptr<Running>>* running);
  // Whether `r` checks guesses in this step (a decoding job, a drafter).
  bool Speculates(const Running& r) const;
  // The job's options with the queue's draft_tokens.
  GenerateOptions Options(const Running& r) const;
  // The speculative half of a step for `r` after the batched forward
  // (FinishSpeculativePass); true when the job ended (with `*failed` set
  // on an error).
  bool FinishSpeculation(Running& r, SpeculativePlan& plan,
                         std::vector<int32_t> history,
                         const std::vector<float>& logits, StepReport* report,
                         absl::Status* failed);
  // Ends a finished job: its state kept (prefix cache, store) or freed.
  void Keep(Running& r);
  // Whether the step that feeds `take` more ids and ends `r`'s prompt should
  // keep the state at the prompt's end as well (a state that cannot be cut
  // back there later: recurrent, windowed); prepares it to go back.
  bool WantsPromptEnd(Running& r, size_t take);
  // After that step: keeps the state one id short of the prompt (prefix
  // cache and store), `r` going on from a copy.
  void KeepPromptEnd(Running& r);

  LanguageModel* model_;
  const size_t max_queue_, max_batch_, prefill_chunk_;
  const std::shared_ptr<Drafter> drafter_;
  const int draft_tokens_;
  const std::function<void(const StepReport&)> on_step_;
  const std::function<void(size_t waiting)> on_idle_;
  StepReport pending_report_;  // loop thread only: admissions since a step
  size_t widest_step_ = 0;     // guarded by mu_
  uint64_t prefix_hits_ = 0, reused_tokens_ = 0;  // guarded by mu_
  uint64_t cancelled_ = 0;                        // guarded by mu_
  size_t running_ = 0;                            // guarded by mu_
  std::unique_ptr<PrefixCache> cache_;            // loop thread only; null: off
  std::shared_ptr<PrefixStore> store_;            // loop thread only; null: off
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenerationJob> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_GENERATION_QUEUE_H_
