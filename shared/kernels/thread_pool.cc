#include "shared/kernels/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace flotilla::kernels {

namespace {

// How long a thread polls for the next hand-off before sleeping on a
// condition variable. One-row decode runs ~900 small matmuls per token a
// few tens of microseconds apart; a futex sleep and wake per matmul cost
// more than the matmul's second half on these VMs (an MXFP4 768 x 1024
// expert matrix: 95 us on one thread, 81 us on two sleeping, 52 us on two
// polling; bench/measurements.md). Polling is bounded, so an idle pool
// sleeps within 100 us of its last job.
constexpr auto kPoll = std::chrono::microseconds(100);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `ready` until it holds or kPoll has passed.
template <typename Ready>
void PollBriefly(const Ready& ready) {
  const auto until = std::chrono::steady_clock::now() + kPoll;
  while (!ready() && std::chrono::steady_clock::now() < until) CpuRelax();
}

}  // namespace

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
    stop_.store(true, std::memory_order_release);
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
  published_done_.store(0, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  // Polling workers see the new generation; only sleeping ones need a wake.
  if (sleeping_workers_ > 0) work_cv_.notify_all();

  // Run chunks on this thread too until none are left to claim.
  while (next_chunk_ < num_chunks_) {
    const size_t c = next_chunk_++;
    lock.unlock();
    const size_t begin = c * chunk;
    fn(begin, std::min(n, begin + chunk));
    lock.lock();
    published_done_.store(++chunks_done_, std::memory_order_release);
  }
  if (chunks_done_ != num_chunks_) {
    // A worker is finishing the last chunks.
    const size_t all = num_chunks_;
    lock.unlock();
    PollBriefly(
        [&] { return published_done_.load(std::memory_order_acquire) == all; });
    lock.lock();
    caller_sleeping_ = true;
    done_cv_.wait(lock, [this] { return chunks_done_ == num_chunks_; });
    caller_sleeping_ = false;
  }
  // Workers only dereference job_ after claiming a chunk, and none are left,
  // so clearing it here keeps a dangling pointer from ever being used.
  job_ = nullptr;
}

void ThreadPool::WorkerLoop(int /*index*/) {
  uint64_t seen_generation = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    lock.unlock();
    PollBriefly([&] {
      return generation_.load(std::memory_order_acquire) != seen_generation ||
             stop_.load(std::memory_order_acquire);
    });
    lock.lock();
    // The job's fields are read under mu_ below, as before polling existed.
    ++sleeping_workers_;
    work_cv_.wait(lock, [&] {
      return stop_.load(std::memory_order_relaxed) ||
             generation_.load(std::memory_order_relaxed) != seen_generation;
    });
    --sleeping_workers_;
    if (stop_.load(std::memory_order_relaxed)) return;
    seen_generation = generation_.load(std::memory_order_relaxed);
    while (next_chunk_ < num_chunks_) {
      const size_t c = next_chunk_++;
      const std::function<void(size_t, size_t)>* job = job_;
      const size_t n = job_n_;
      const size_t chunk = job_chunk_;
      lock.unlock();
      const size_t begin = c * chunk;
      (*job)(begin, std::min(n, begin + chunk));
      lock.lock();
      published_done_.store(++chunks_done_, std::memory_order_release);
      if (chunks_done_ == num_chunks_ && caller_sleeping_) {
        done_cv_.notify_one();
      }
    }
  }
}

}  // namespace flotilla::kernels
