#include "coordinator/serve/generation_queue.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace flotilla::coordinator::serve {

GenerationQueue::GenerationQueue(LanguageModel* model, size_t max_queue)
    : model_(model), max_queue_(max_queue < 1 ? 1 : max_queue) {
  thread_ = std::thread([this] { Loop(); });
}

GenerationQueue::~GenerationQueue() {
  Shutdown();
  thread_.join();
}

absl::Status GenerationQueue::Submit(GenerationJob job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return absl::UnavailableError("the server is shutting down");
    }
    if (jobs_.size() >= max_queue_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the request queue is full (", max_queue_, " waiting); retry later"));
    }
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
  return absl::OkStatus();
}

void GenerationQueue::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

size_t GenerationQueue::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size();
}

void GenerationQueue::Loop() {
  for (;;) {
    GenerationJob job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping and drained
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    absl::StatusOr<GenerateResult> result =
        Generate(*model_, job.prompt, job.options, job.on_token);
    if (job.on_done) job.on_done(std::move(result));
  }
}

}  // namespace flotilla::coordinator::serve
