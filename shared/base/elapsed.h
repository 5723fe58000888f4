// Wall-clock intervals as seconds in double, for stats and logs: one
// definition for the helpers every timing site used to write itself.
#ifndef FLOTILLA_SHARED_BASE_ELAPSED_H_
#define FLOTILLA_SHARED_BASE_ELAPSED_H_

#include <chrono>

namespace flotilla::base {

// A steady-clock interval in seconds.
inline double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Seconds from `start` until now (steady clock).
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return Seconds(std::chrono::steady_clock::now() - start);
}

}  // namespace flotilla::base

#endif  // FLOTILLA_SHARED_BASE_ELAPSED_H_
