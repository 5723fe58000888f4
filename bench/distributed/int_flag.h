// The two ping-pong benchmarks' flag parsing: "--name=N" with N >= 0.
#ifndef FLOTILLA_BENCH_DISTRIBUTED_INT_FLAG_H_
#define FLOTILLA_BENCH_DISTRIBUTED_INT_FLAG_H_

#include <string>

#include "absl/strings/numbers.h"

namespace flotilla::bench {

// False when `arg` is not "--name=..."; otherwise true, with `*out` the
// value, or -1 when it is not a non-negative integer (for the caller to
// refuse).
inline bool ParseIntFlag(const std::string& arg, const char* name, int* out) {
  const std::string prefix = std::string("--") + name + "=";
  if (arg.rfind(prefix, 0) != 0) return false;
  if (!absl::SimpleAtoi(arg.substr(prefix.size()), out) || *out < 0) {
    *out = -1;
  }
  return true;
}

}  // namespace flotilla::bench

#endif  // FLOTILLA_BENCH_DISTRIBUTED_INT_FLAG_H_
