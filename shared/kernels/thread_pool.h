// A fixed-size pool of worker threads for data-parallel kernels.
//
// Concurrency contract: ParallelFor may be called from one thread at a time
// (the engine's forward pass); it blocks until every chunk has run. Work is
// split into contiguous index ranges; callers make each output element depend
// only on its own index so results are identical for any thread count.
// Between jobs, threads poll for up to 100 us before sleeping, so the
// back-to-back small jobs of one-row decoding skip a futex wake each.
#ifndef FLOTILLA_SHARED_KERNELS_THREAD_POOL_H_
#define FLOTILLA_SHARED_KERNELS_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace flotilla::kernels {

class ThreadPool {
 public:
  // num_threads >= 1 counts the calling thread: a pool of 1 runs inline.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n). Chunks are at
  // least `min_chunk` long (except the last) to keep overhead low. fn must
  // not call ParallelFor on the same pool (the pool is not re-entrant).
  void ParallelFor(size_t n, size_t min_chunk,
                   const std::function<void(size_t, size_t)>& fn);

 private:
  void WorkerLoop(int index);

  const int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  // Guarded by mu_: the current job and its bookkeeping.
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0;
  size_t job_chunk_ = 0;
  size_t next_chunk_ = 0;
  size_t num_chunks_ = 0;
  size_t chunks_done_ = 0;
  // Written under mu_; also read without it by threads polling for a
  // hand-off (thread_pool.cc).
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<size_t> published_done_{0};  // chunks_done_, for the caller
  // Guarded by mu_: who sleeps on a condition variable and needs a notify.
  int sleeping_workers_ = 0;
  bool caller_sleeping_ = false;
};

// Runs fn over [0, n) on `pool`, or inline when pool is null.
inline void ParallelFor(ThreadPool* pool, size_t n, size_t min_chunk,
                        const std::function<void(size_t, size_t)>& fn) {
  if (pool == nullptr || pool->num_threads() <= 1 || n <= min_chunk) {
    if (n > 0) fn(0, n);
    return;
  }
  pool->ParallelFor(n, min_chunk, fn);
}

}  // namespace flotilla::kernels

#endif  // FLOTILLA_SHARED_KERNELS_THREAD_POOL_H_
