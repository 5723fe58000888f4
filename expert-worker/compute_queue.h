// One thread that runs jobs in arrival order: the worker's compute thread.
// ExpertCompute::Run and Prefetch may only be called from one thread, and
// gRPC's callback threads must never block on disk or compute, so every
// Compute and Prefetch is queued here and finished from this thread.
//
// Push never blocks: it refuses when `max_queued` jobs are waiting or the
// queue is stopping, so a misbehaving client cannot grow memory without
// bound. Thread-safe.
#ifndef FLOTILLA_EXPERT_WORKER_COMPUTE_QUEUE_H_
#define FLOTILLA_EXPERT_WORKER_COMPUTE_QUEUE_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace flotilla::expert_worker {

class ComputeQueue {
 public:
  explicit ComputeQueue(size_t max_queued)
      : max_queued_(max_queued), thread_([this] { Loop(); }) {}
  ~ComputeQueue() { Stop(); }
  ComputeQueue(const ComputeQueue&) = delete;
  ComputeQueue& operator=(const ComputeQueue&) = delete;

  // False (and `job` dropped) when full or stopping.
  bool Push(std::function<void()> job) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || jobs_.size() >= max_queued_) return false;
    jobs_.push_back(std::move(job));
    cv_.notify_one();
    return true;
  }

  // Runs what is queued, then joins the thread. Idempotent.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    while (true) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // stopping and drained
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace flotilla::expert_worker

#endif  // FLOTILLA_EXPERT_WORKER_COMPUTE_QUEUE_H_
