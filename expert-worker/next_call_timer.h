// When a busy-polling worker should poll for its next Compute call.
//
// At decode a coordinator sends one call per MoE layer, and the time from
// a layer's answer to the next call (the coordinator's attention for the
// next layer, or between tokens its sampling and dense layers) changes
// little from one token to the next. Where that gap is longer than the
// poll (--busy-poll-us), polling at once runs out before the call comes
// and the call lands on a sleeping thread, whose wake-up the coordinator
// pays. So after answering layer L the worker sleeps until half the poll
// before the call is due (the gap after L at the last step) and polls from
// then; the CPU is free meanwhile. A call that comes earlier still wakes
// the thread at once, as without polling.
//
// Plain C++ (no gRPC); used by the polling thread only.
#ifndef FLOTILLA_EXPERT_WORKER_NEXT_CALL_TIMER_H_
#define FLOTILLA_EXPERT_WORKER_NEXT_CALL_TIMER_H_

#include <chrono>
#include <cstdint>
#include <vector>

namespace flotilla::expert_worker {

class NextCallTimer {
 public:
  using Clock = std::chrono::system_clock;

  // `spin`: how long the worker polls; `slack`: how much earlier still the
  // sleep aims (the sleep's timer may end that late;
  // base::kCoarseTimerSlack); `enabled` false makes PollFrom always
  // "at once" (--busy-poll-when-due=false).
  NextCallTimer(std::chrono::microseconds spin, std::chrono::microseconds slack,
                bool enabled);

  // A Compute call arrived at `now`. The first one after an answer ends
  // that answer's gap.
  void Arrived(Clock::time_point now);
  // The answer to a Compute of `layer` was sent at `now` (its write done).
  void Answered(uint32_t layer, Clock::time_point now);
  // When the wait that starts at `now` should start polling: half the
  // poll and the slack before the next call is due, when the last gap
  // after the same layer was longer than the poll and that is still ahead;
  // otherwise {} (at once). Counts the timed waits.
  Clock::time_point PollFrom(Clock::time_point now);

  uint64_t timed_waits() const { return timed_waits_; }
  // Calls that arrived before their wait started polling (each paid a
  // wake-up).
  uint64_t early_calls() const { return early_calls_; }

 private:
  // Layers beyond this are not timed (a decoder has far fewer).
  static constexpr uint32_t kMaxLayers = 4096;

  const std::chrono::microseconds spin_;
  const std::chrono::microseconds slack_;
  const bool enabled_;
  // gap_after_[L]: from the answer of L to the next call, at the last
  // step; zero when not seen.
  std::vector<Clock::duration> gap_after_;
  bool waiting_ = false;  // an answer was sent, no call has come since
  uint32_t last_layer_ = 0;
  Clock::time_point last_answer_;
  // Of the wait in progress: when it polls from ({} = at once), and
  // whether that was decided yet.
  Clock::time_point poll_from_;
  bool decided_ = false;
  uint64_t timed_waits_ = 0;
  uint64_t early_calls_ = 0;
};

}  // namespace flotilla::expert_worker

#endif  // FLOTILLA_EXPERT_WORKER_NEXT_CALL_TIMER_H_
