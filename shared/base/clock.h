// Where "now" comes from for decisions made on time: health-check
// intervals, retry backoffs, idle detection. Code that decides takes a
// Clock (Clock::Real() by default), so a test moves the time it sees with a
// FakeClock (shared/testing/fake_clock.h) instead of sleeping and hoping a
// loaded machine keeps up. Durations measured for reports stay on
// std::chrono::steady_clock.
#ifndef FLOTILLA_SHARED_BASE_CLOCK_H_
#define FLOTILLA_SHARED_BASE_CLOCK_H_

#include <chrono>

namespace flotilla::base {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  virtual time_point Now() const = 0;

  // std::chrono::steady_clock; lives for the process.
  static const Clock* Real();
};

class RealClock final : public Clock {
 public:
  time_point Now() const override { return std::chrono::steady_clock::now(); }
};

inline const Clock* Clock::Real() {
  static const RealClock* clock = new RealClock;
  return clock;
}

}  // namespace flotilla::base

#endif  // FLOTILLA_SHARED_BASE_CLOCK_H_
