#include "expert-worker/next_call_timer.h"

#include <chrono>
#include <utility>

#include "gtest/gtest.h"

namespace flotilla::expert_worker {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Clock = NextCallTimer::Clock;

const Clock::time_point kT0 = Clock::time_point{} + std::chrono::hours(1);
constexpr microseconds kNoSlack{0};

TEST(NextCallTimerTest, PollsAtOnceUntilAGapLongerThanThePollIsSeen) {
  NextCallTimer timer(microseconds(2000), kNoSlack, true);
  EXPECT_EQ(timer.PollFrom(kT0), Clock::time_point{});  // nothing answered
  timer.Answered(3, kT0);
  EXPECT_EQ(timer.PollFrom(kT0), Clock::time_point{});  // gap not seen yet
  timer.Arrived(kT0 + milliseconds(10));
  EXPECT_EQ(timer.PollFrom(kT0 + milliseconds(10)), Clock::time_point{});
  // Next step, same layer: sleep until half the poll before it is due.
  const auto t1 = kT0 + milliseconds(100);
  timer.Answered(3, t1);
  EXPECT_EQ(timer.PollFrom(t1), t1 + milliseconds(9));
  // Woken by another event: the same wait, the same time.
  EXPECT_EQ(timer.PollFrom(t1 + milliseconds(1)), t1 + milliseconds(9));
  EXPECT_EQ(timer.timed_waits(), 1u);
  timer.Arrived(t1 + milliseconds(11));  // within the poll: not early
  EXPECT_EQ(timer.early_calls(), 0u);
}

TEST(NextCallTimerTest, GapsAreKeptPerLayerAndAShortGapPollsAtOnce) {
  NextCallTimer timer(microseconds(2000), kNoSlack, true);
  timer.Answered(1, kT0);
  timer.Arrived(kT0 + milliseconds(50));  // after layer 1: 50 ms
  timer.Answered(2, kT0 + milliseconds(60));
  timer.Arrived(kT0 + milliseconds(61));  // after layer 2: 1 ms < poll
  const auto t1 = kT0 + milliseconds(200);
  timer.Answered(2, t1);
  EXPECT_EQ(timer.PollFrom(t1), Clock::time_point{});
  timer.Arrived(t1 + milliseconds(1));
  timer.Answered(1, t1 + milliseconds(5));
  EXPECT_EQ(timer.PollFrom(t1 + milliseconds(5)), t1 + milliseconds(54));
  // A call that comes before the poll starts is counted, and its gap is
  // what the next step of that layer expects.
  timer.Arrived(t1 + milliseconds(20));
  EXPECT_EQ(timer.early_calls(), 1u);
  const auto t2 = kT0 + milliseconds(400);
  timer.Answered(1, t2);
  EXPECT_EQ(timer.PollFrom(t2), t2 + milliseconds(14));
  EXPECT_EQ(timer.timed_waits(), 2u);
}

TEST(NextCallTimerTest, TheSlackMovesTheSleepEarlierOrCancelsIt) {
  NextCallTimer timer(microseconds(2000), microseconds(2000), true);
  timer.Answered(1, kT0);
  timer.Arrived(kT0 + milliseconds(10));
  timer.Answered(2, kT0 + milliseconds(20));
  timer.Arrived(kT0 + milliseconds(23));  // 3 ms: due - 1 ms - 2 ms = now
  const auto t1 = kT0 + milliseconds(100);
  timer.Answered(1, t1);
  EXPECT_EQ(timer.PollFrom(t1), t1 + milliseconds(7));
  timer.Arrived(t1 + milliseconds(10));
  timer.Answered(2, t1 + milliseconds(20));
  EXPECT_EQ(timer.PollFrom(t1 + milliseconds(20)), Clock::time_point{});
  EXPECT_EQ(timer.timed_waits(), 1u);
}

TEST(NextCallTimerTest, DisabledOrWithoutPollingItNeverSleeps) {
  for (const auto& [spin, enabled] : {std::pair{microseconds(2000), false},
                                      std::pair{microseconds(0), true}}) {
    NextCallTimer timer(spin, kNoSlack, enabled);
    for (int step = 0; step < 3; ++step) {
      const auto t = kT0 + milliseconds(100 * step);
      timer.Answered(1, t);
      EXPECT_EQ(timer.PollFrom(t), Clock::time_point{});
      timer.Arrived(t + milliseconds(50));
    }
    EXPECT_EQ(timer.timed_waits(), 0u);
  }
}

TEST(NextCallTimerTest, LayersPastTheLimitAreNotTimed) {
  NextCallTimer timer(microseconds(2000), kNoSlack, true);
  for (int step = 0; step < 2; ++step) {
    const auto t = kT0 + milliseconds(100 * step);
    timer.Answered(4'000'000'000u, t);
    EXPECT_EQ(timer.PollFrom(t), Clock::time_point{});
    timer.Arrived(t + milliseconds(50));
  }
  EXPECT_EQ(timer.timed_waits(), 0u);
}

}  // namespace
}  // namespace flotilla::expert_worker
