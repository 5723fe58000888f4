#include "expert-worker/next_call_timer.h"

#include "shared/base/poll_timing.h"

namespace flotilla::expert_worker {

NextCallTimer::NextCallTimer(std::chrono::microseconds spin,
                             std::chrono::microseconds slack, bool enabled)
    : spin_(spin), slack_(slack), enabled_(enabled && spin.count() > 0) {}

void NextCallTimer::Arrived(Clock::time_point now) {
  if (!waiting_) return;
  waiting_ = false;
  gap_after_[last_layer_] = now - last_answer_;
  if (poll_from_ != Clock::time_point{} && now < poll_from_) ++early_calls_;
  poll_from_ = {};
  decided_ = false;
}

void NextCallTimer::Answered(uint32_t layer, Clock::time_point now) {
  if (!enabled_ || layer >= kMaxLayers) {
    waiting_ = false;
    return;
  }
  if (layer >= gap_after_.size()) gap_after_.resize(layer + 1);
  waiting_ = true;
  last_layer_ = layer;
  last_answer_ = now;
  poll_from_ = {};
  decided_ = false;
}

NextCallTimer::Clock::time_point NextCallTimer::PollFrom(
    Clock::time_point now) {
  if (!waiting_) return {};
  if (decided_) return poll_from_;  // the same wait, woken by another event
  decided_ = true;
  const std::chrono::nanoseconds sleep = base::SleepBeforePolling(
      now - last_answer_, gap_after_[last_layer_], spin_, slack_);
  if (sleep <= std::chrono::nanoseconds::zero()) return {};
  poll_from_ = now + std::chrono::duration_cast<Clock::duration>(sleep);
  ++timed_waits_;
  return poll_from_;
}

}  // namespace flotilla::expert_worker
