#include "shared/transport/cq_poll.h"

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

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
