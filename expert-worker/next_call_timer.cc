#include "expert-worker/next_call_timer.h"

namespace flotilla::expert_worker {

NextCallTimer::NextCallTimer(std::chrono::microseconds spin, bool enabled)
    : spin_(spin), enabled_(enabled && spin.count() > 0) {}

void NextCallTimer::Arrived(Clock::time_point now) {
  if (!waiting_) return;
  waiting_ = false;
  gap_after_[last_layer_] = now - last_answer_;
  if (poll_from_ != Clock::time_point{} && now < poll_from_) ++early_calls_;
  poll_from_ = {};
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
}

NextCallTimer::Clock::time_point NextCallTimer::PollFrom() {
  if (!waiting_) return {};
  if (poll_from_ != Clock::time_point{}) return poll_from_;  // same wait
  const Clock::duration gap = gap_after_[last_layer_];
  if (gap <= spin_) return {};  // unknown (zero), or the poll covers it
  poll_from_ = last_answer_ + gap - spin_ / 2;
  ++timed_waits_;
  return poll_from_;
}

}  // namespace flotilla::expert_worker
