#include "shared/kernels/thread_pool.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <mutex>

namespace flotilla::kernels {

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(std::max(1, num_threads)) {
  // The calling thread takes part in every ParallelFor, so a pool of N
  // threads owns N-1 workers.
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::ParallelFor(size_t n, size_t min_chunk,
                             const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  min_chunk = std::max<size_t>(1, min_chunk);
  if (num_threads_ <= 1 || n <= min_chunk) {
    fn(0, n);
    return;
  }
  // About four chunks per thread: enough slack to even out a thread that is
  // descheduled (2 vCPUs shared with the OS), few enough that the mutex
  // hand-off per chunk stays negligible.
  const size_t target = static_cast<size_t>(num_threads_) * 4;
  const size_t chunk = std::max(min_chunk, (n + target - 1) / target);
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  next_chunk_ = 0;
  num_chunks_ = (n + chunk - 1) / chunk;
  chunks_done_ = 0;
  ++generation_;
  work_cv_.notify_all();

  // Run chunks on this thread too until none are left to claim.
  while (next_chunk_ < num_chunks_) {
    const size_t c = next_chunk_++;
    lock.unlock();
    const size_t begin = c * chunk;
    fn(begin, std::min(n, begin + chunk));
    lock.lock();
    ++chunks_done_;
  }
  done_cv_.wait(lock, [this] { return chunks_done_ == num_chunks_; });
  // Workers only dereference job_ after claiming a chunk, and none are left,
  // so clearing it here keeps a dangling pointer from ever being used.
  job_ = nullptr;
}

void ThreadPool::WorkerLoop(int /*index*/) {
  uint64_t seen_generation = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock,
                  [&] { return stop_ || generation_ != seen_generation; });
    if (stop_) return;
    seen_generation = generation_;
    while (next_chunk_ < num_chunks_) {
      const size_t c = next_chunk_++;
      const std::function<void(size_t, size_t)>* job = job_;
      const size_t n = job_n_;
      const size_t chunk = job_chunk_;
      lock.unlock();
      const size_t begin = c * chunk;
      (*job)(begin, std::min(n, begin + chunk));
      lock.lock();
      if (++chunks_done_ == num_chunks_) done_cv_.notify_one();
    }
  }
}

}  // namespace flotilla::kernels
