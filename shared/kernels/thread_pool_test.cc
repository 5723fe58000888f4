#include "shared/kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

namespace flotilla::kernels {
namespace {

// Runs ParallelFor and checks that every index in [0, n) was visited exactly
// once, with ranges no shorter than min_chunk except the last.
void ExpectCoversOnce(ThreadPool* pool, size_t n, size_t min_chunk) {
  std::vector<std::atomic<int>> hits(n);
  std::atomic<size_t> short_ranges{0};
  ParallelFor(pool, n, min_chunk, [&](size_t begin, size_t end) {
    ASSERT_LT(begin, end);
    ASSERT_LE(end, n);
    if (end - begin < min_chunk && end != n) ++short_ranges;
    for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
  });
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " index " << i;
  }
  EXPECT_EQ(short_ranges.load(), 0u);
}

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (size_t n : {0, 1, 2, 7, 64, 1000, 4097}) {
      for (size_t min_chunk : {1, 3, 16, 5000}) {
        ExpectCoversOnce(&pool, n, min_chunk);
      }
    }
  }
  ExpectCoversOnce(nullptr, 100, 1);
}

TEST(ThreadPoolTest, ManyJobsInARow) {
  // Back-to-back jobs exercise the hand-off between generations, where a
  // late worker must not run a chunk of a job that has already finished.
  ThreadPool pool(2);
  std::atomic<size_t> sum{0};
  for (int job = 0; job < 2000; ++job) {
    pool.ParallelFor(64, 1, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) sum.fetch_add(i);
    });
  }
  EXPECT_EQ(sum.load(), 2000u * (63u * 64u / 2u));
}

TEST(ThreadPoolTest, JobsAfterIdleGapsOfEveryLength) {
  // Gaps shorter and longer than the poll: some hand-offs find the workers
  // polling, others asleep on the condition variable, and the caller may
  // poll or sleep waiting for the last chunk. Every job must run whole.
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    size_t expected = 0;
    std::atomic<size_t> sum{0};
    for (int job = 0; job < 120; ++job) {
      const auto gap = std::chrono::microseconds((job % 6) * 60);
      std::this_thread::sleep_for(gap);
      const size_t n = 16 + job % 5;
      pool.ParallelFor(n, 1, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) sum.fetch_add(i + 1);
        // A slow last chunk now and then makes the caller wait for it.
        if (end == n && job % 4 == 0) {
          std::this_thread::sleep_for(std::chrono::microseconds(300));
        }
      });
      expected += n * (n + 1) / 2;
      ASSERT_EQ(sum.load(), expected) << "job " << job;
    }
  }
}

TEST(ThreadPoolTest, UsesMoreThanOneThread) {
  ThreadPool pool(2);
  std::atomic<int> in_flight{0}, max_in_flight{0};
  // Every chunk waits briefly so a second thread, if any, overlaps it.
  pool.ParallelFor(8, 1, [&](size_t, size_t) {
    const int now = ++in_flight;
    int seen = max_in_flight.load();
    while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
    }
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(5);
    while (std::chrono::steady_clock::now() < until) {
    }
    --in_flight;
  });
  EXPECT_EQ(max_in_flight.load(), 2);
}

}  // namespace
}  // namespace flotilla::kernels
