// When a thread that polls for an expected event should stop sleeping and
// start polling: the rule shared by the coordinator (a layer's answers,
// timed by the same layer's last step) and the polling expert worker (its
// next call, timed by the gap after the same layer's answer last step).
// Plain C++; the sleeping itself is transport::NextWithSpinFrom.
#ifndef FLOTILLA_SHARED_BASE_POLL_TIMING_H_
#define FLOTILLA_SHARED_BASE_POLL_TIMING_H_

#include <chrono>

namespace flotilla::base {

// gRPC 1.51 keeps time in whole milliseconds and rounds deadlines up:
// CompletionQueue::AsyncNext with a deadline 0.3-5 ms ahead returned
// 0.6-1.9 ms after it (30 tries each, on the 2-vCPU VM). A sleep that must
// end before an event is due aims this much earlier.
inline constexpr std::chrono::microseconds kCoarseTimerSlack{2000};

// How long to sleep, `since` after a wait began, before polling for an
// event that came `expected` after the start of the same wait last time,
// with polls of `spin`: until spin / 2 and `slack` before it is due. Zero
// or less means poll at once: nothing seen yet (`expected` zero), a poll
// that covers the event from the start, or too little time left to sleep.
inline std::chrono::nanoseconds SleepBeforePolling(
    std::chrono::nanoseconds since, std::chrono::nanoseconds expected,
    std::chrono::microseconds spin, std::chrono::microseconds slack) {
  if (expected <= spin) return std::chrono::nanoseconds::zero();
  return expected - spin / 2 - slack - since;
}

}  // namespace flotilla::base

#endif  // FLOTILLA_SHARED_BASE_POLL_TIMING_H_
