#include "expert-worker/next_call_timer.h"

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
  const Clock::duration gap = gap_after_[last_layer_];
  if (gap <= spin_) return {};  // unknown (zero), or the poll covers it
  const Clock::time_point from = last_answer_ + gap - spin_ / 2 - slack_;
  if (from <= now) return {};  // too soon to sleep
  poll_from_ = from;
  ++timed_waits_;
  return poll_from_;
}

}  // namespace flotilla::expert_worker
