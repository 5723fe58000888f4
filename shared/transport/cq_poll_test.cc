#include "shared/transport/cq_poll.h"

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>
#include <time.h>

#include <chrono>

#include "gtest/gtest.h"

namespace flotilla::transport {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::system_clock;

int tag_a = 0, tag_b = 0;

TEST(NextWithSpinTest, ReturnsAnEventThatArrivesWhileSpinning) {
  grpc::CompletionQueue cq;
  grpc::Alarm alarm;
  alarm.Set(&cq, system_clock::now() + milliseconds(5), &tag_a);
  void* tag = nullptr;
  bool ok = false;
  ASSERT_TRUE(NextWithSpin(&cq, microseconds(2'000'000), &tag, &ok));
  EXPECT_EQ(tag, &tag_a);
  EXPECT_TRUE(ok);
}

TEST(NextWithSpinTest, BlocksForAnEventAfterTheSpinEnds) {
  grpc::CompletionQueue cq;
  grpc::Alarm alarm;
  const auto start = system_clock::now();
  alarm.Set(&cq, start + milliseconds(50), &tag_b);
  void* tag = nullptr;
  bool ok = false;
  // Spins 1 ms, then must still wait for the event rather than give up.
  ASSERT_TRUE(NextWithSpin(&cq, microseconds(1000), &tag, &ok));
  EXPECT_EQ(tag, &tag_b);
  EXPECT_TRUE(ok);
  EXPECT_GE(system_clock::now() - start, milliseconds(40));
}

TEST(NextWithSpinTest, ACancelledAlarmIsDeliveredNotOk) {
  grpc::CompletionQueue cq;
  grpc::Alarm alarm;
  alarm.Set(&cq, system_clock::now() + std::chrono::hours(1), &tag_a);
  alarm.Cancel();
  void* tag = nullptr;
  bool ok = true;
  ASSERT_TRUE(NextWithSpin(&cq, microseconds(1000), &tag, &ok));
  EXPECT_EQ(tag, &tag_a);
  EXPECT_FALSE(ok);
}

TEST(NextWithSpinUntilTest, TimesOutAtTheDeadlineWhileSpinningOrBlocking) {
  grpc::CompletionQueue cq;
  void* tag = nullptr;
  bool ok = false;
  for (const auto spin : {microseconds(1'000'000), microseconds(1000)}) {
    // The deadline cuts a long spin short; a short spin then blocks until
    // the deadline.
    const auto start = system_clock::now();
    EXPECT_EQ(NextWithSpinUntil(&cq, spin, start + milliseconds(40), &tag, &ok),
              grpc::CompletionQueue::TIMEOUT);
    const auto waited = system_clock::now() - start;
    EXPECT_GE(waited, milliseconds(39));
    EXPECT_LT(waited, milliseconds(900));
  }
  grpc::Alarm alarm;
  alarm.Set(&cq, system_clock::now() + milliseconds(5), &tag_a);
  EXPECT_EQ(NextWithSpinUntil(&cq, microseconds(100),
                              system_clock::now() + std::chrono::seconds(5),
                              &tag, &ok),
            grpc::CompletionQueue::GOT_EVENT);
  EXPECT_EQ(tag, &tag_a);
  EXPECT_TRUE(ok);
}

// CPU time of the calling thread.
std::chrono::nanoseconds ThreadCpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

TEST(NextWithSpinFromTest, SleepsUntilSpinFromThenPolls) {
  grpc::CompletionQueue cq;
  grpc::Alarm alarm;
  const auto start = system_clock::now();
  const auto cpu_start = ThreadCpu();
  alarm.Set(&cq, start + milliseconds(150), &tag_a);
  void* tag = nullptr;
  bool ok = false;
  // Asleep for the first 100 ms, then polling for the event at 150 ms.
  ASSERT_EQ(
      NextWithSpinFrom(&cq, start + milliseconds(100), microseconds(2'000'000),
                       system_clock::time_point::max(), &tag, &ok),
      grpc::CompletionQueue::GOT_EVENT);
  EXPECT_EQ(tag, &tag_a);
  EXPECT_GE(system_clock::now() - start, milliseconds(145));
  // Polling all along would have used ~150 ms of CPU, the 50 ms of polling
  // at most that.
  EXPECT_LT(ThreadCpu() - cpu_start, milliseconds(90));
}

TEST(NextWithSpinFromTest, AnEarlierEventEndsTheSleep) {
  grpc::CompletionQueue cq;
  grpc::Alarm alarm;
  const auto start = system_clock::now();
  alarm.Set(&cq, start + milliseconds(5), &tag_b);
  void* tag = nullptr;
  bool ok = false;
  ASSERT_EQ(
      NextWithSpinFrom(&cq, start + std::chrono::seconds(2), microseconds(1000),
                       system_clock::time_point::max(), &tag, &ok),
      grpc::CompletionQueue::GOT_EVENT);
  EXPECT_EQ(tag, &tag_b);
  EXPECT_LT(system_clock::now() - start, milliseconds(1000));
}

TEST(NextWithSpinFromTest, TimesOutAtTheDeadlineBeforeOrAfterSpinFrom) {
  grpc::CompletionQueue cq;
  void* tag = nullptr;
  bool ok = false;
  // The deadline falls in the sleep, then in the (long) poll.
  for (const auto spin_from : {milliseconds(3'600'000), milliseconds(20)}) {
    const auto start = system_clock::now();
    EXPECT_EQ(NextWithSpinFrom(&cq, start + spin_from, microseconds(1'000'000),
                               start + milliseconds(40), &tag, &ok),
              grpc::CompletionQueue::TIMEOUT);
    const auto waited = system_clock::now() - start;
    EXPECT_GE(waited, milliseconds(39));
    EXPECT_LT(waited, milliseconds(900));
  }
}

TEST(NextWithSpinTest, FalseOnceShutDownAndDrained) {
  for (const int spin_us : {0, 1000}) {
    grpc::CompletionQueue cq;
    cq.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    EXPECT_FALSE(NextWithSpin(&cq, microseconds(spin_us), &tag, &ok))
        << spin_us;
  }
}

}  // namespace
}  // namespace flotilla::transport
