// A Clock (shared/base/clock.h) that moves only when a test says so.
// Thread-safe: the health thread may read it while the test advances it.
#ifndef FLOTILLA_SHARED_TESTING_FAKE_CLOCK_H_
#define FLOTILLA_SHARED_TESTING_FAKE_CLOCK_H_

#include <mutex>

#include "shared/base/clock.h"

namespace flotilla::testutil {

class FakeClock : public base::Clock {
 public:
  time_point Now() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  void Advance(std::chrono::nanoseconds d) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += d;
  }

 private:
  mutable std::mutex mu_;
  time_point now_ = time_point() + std::chrono::hours(1);
};

}  // namespace flotilla::testutil

#endif  // FLOTILLA_SHARED_TESTING_FAKE_CLOCK_H_
