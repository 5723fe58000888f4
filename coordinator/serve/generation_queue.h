// The serving loop's first form: a bounded queue of generation jobs run one
// after another on one thread that owns the model (opened once for the
// process). A full queue is refused at once (HTTP 429), never blocks; a job
// whose client went away is cancelled at its next token. Continuous
// batching (several sequences per forward pass) replaces the one-at-a-time
// loop behind this same interface.
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
#include "coordinator/generate.h"
#include "coordinator/model/language_model.h"

namespace flotilla::coordinator::serve {

struct GenerationJob {
  std::vector<int32_t> prompt;
  GenerateOptions options;
  // On the queue's thread, after each token; false cancels the job.
  std::function<bool(int32_t id)> on_token;
  // On the queue's thread, once, when the job ends (also for a failure).
  std::function<void(absl::StatusOr<GenerateResult>)> on_done;
};

class GenerationQueue {
 public:
  // `model` must outlive the queue. `max_queue` jobs may wait (>= 1).
  GenerationQueue(LanguageModel* model, size_t max_queue);
  ~GenerationQueue();  // finishes the running job, fails the waiting ones

  // ResourceExhausted when `max_queue` jobs already wait; Unavailable after
  // Shutdown.
  absl::Status Submit(GenerationJob job);
  // Stops taking jobs; waiting ones still run (graceful drain).
  void Shutdown();
  size_t waiting() const;

 private:
  void Loop();

  LanguageModel* model_;
  const size_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenerationJob> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_GENERATION_QUEUE_H_
