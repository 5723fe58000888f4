// The worker front end's hand-off, without gRPC: callers on many threads
// (gRPC's callback threads in the worker) push jobs that the one compute
// thread runs. Under ThreadSanitizer (scripts/tsan.sh) these are the checks
// that the hand-off is ordered; the process tests cannot give them, since
// Debian's gRPC is uninstrumented (tests/tsan.supp).
#include "expert-worker/compute_queue.h"

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace flotilla::expert_worker {
namespace {

TEST(ComputeQueueTest, JobsFromManyThreadsRunOnOneThreadInOrderPerCaller) {
  constexpr int kCallers = 4;
  constexpr int kJobsEach = 200;
  // Plain (non-atomic) state touched only by jobs: safe because one thread
  // runs them all, and TSan would report it otherwise.
  std::vector<std::vector<int>> seen(kCallers);
  std::thread::id runner;
  bool one_runner = true;
  {
    ComputeQueue queue(kCallers * kJobsEach);
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
      callers.emplace_back([&, c] {
        for (int j = 0; j < kJobsEach; ++j) {
          ASSERT_TRUE(queue.Push([&, c, j] {
            if (runner == std::thread::id())
              runner = std::this_thread::get_id();
            one_runner = one_runner && runner == std::this_thread::get_id();
            seen[c].push_back(j);
          }));
        }
      });
    }
    for (std::thread& t : callers) t.join();
    queue.Stop();  // runs what is queued, then joins
  }
  EXPECT_TRUE(one_runner);
  EXPECT_NE(runner, std::this_thread::get_id());
  for (int c = 0; c < kCallers; ++c) {
    ASSERT_EQ(seen[c].size(), static_cast<size_t>(kJobsEach)) << "caller " << c;
    for (int j = 0; j < kJobsEach; ++j) EXPECT_EQ(seen[c][j], j);
  }
}

TEST(ComputeQueueTest, AJobsResultReachesTheCallerThroughAPromise) {
  // The worker's pattern: the caller's buffers are written by the job and
  // read by whoever it signals (gRPC's Finish in the worker).
  ComputeQueue queue(8);
  std::vector<std::future<std::vector<float>>> results;
  std::vector<std::promise<std::vector<float>>> promises(8);
  for (int i = 0; i < 8; ++i) {
    results.push_back(promises[i].get_future());
    ASSERT_TRUE(queue.Push([&promises, i] {
      promises[i].set_value(std::vector<float>(64, static_cast<float>(i)));
    }));
  }
  for (int i = 0; i < 8; ++i) {
    const std::vector<float> v = results[i].get();
    ASSERT_EQ(v.size(), 64u);
    EXPECT_EQ(v[63], static_cast<float>(i));
  }
}

TEST(ComputeQueueTest, RefusesWhenFullAndAfterStopButRunsWhatItTook) {
  ComputeQueue queue(2);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  // The first job holds the compute thread, so the next ones queue up.
  ASSERT_TRUE(queue.Push([&] {
    started.set_value();
    released.wait();
  }));
  started.get_future().wait();
  int ran = 0;  // only jobs touch it, on the compute thread
  EXPECT_TRUE(queue.Push([&] { ++ran; }));
  EXPECT_TRUE(queue.Push([&] { ++ran; }));
  EXPECT_FALSE(queue.Push([&] { ++ran; })) << "third queued job accepted";
  release.set_value();
  queue.Stop();
  EXPECT_EQ(ran, 2);
  EXPECT_FALSE(queue.Push([] {})) << "accepted a job after Stop";
}

TEST(ComputeQueueTest, StopWhilePushersRaceNeverLosesAnAcceptedJob) {
  std::atomic<int> accepted{0};
  std::atomic<int> ran{0};
  {
    ComputeQueue queue(1 << 20);
    std::vector<std::thread> callers;
    for (int c = 0; c < 3; ++c) {
      callers.emplace_back([&] {
        for (int j = 0; j < 500; ++j) {
          if (queue.Push([&] { ran.fetch_add(1); })) accepted.fetch_add(1);
        }
      });
    }
    queue.Stop();
    for (std::thread& t : callers) t.join();
  }
  EXPECT_EQ(ran.load(), accepted.load());
}

}  // namespace
}  // namespace flotilla::expert_worker
