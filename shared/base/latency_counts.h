// A latency distribution kept as counts per fixed bucket, cheap enough to
// update on every read or RPC and to copy in a stats snapshot. The engine
// keeps these (no Prometheus types below the metrics layer); /metrics turns
// the increase between two snapshots into histogram observations with the
// same bounds (LatencyCounts::kBounds).
#ifndef FLOTILLA_SHARED_BASE_LATENCY_COUNTS_H_
#define FLOTILLA_SHARED_BASE_LATENCY_COUNTS_H_

#include <array>
#include <cstddef>
#include <cstdint>

namespace flotilla::base {

struct LatencyCounts {
  // Upper bounds in seconds, 100 us (a cached NVMe read, a loopback RPC) to
  // 10 s (a deadline); one more bucket holds everything above.
  static constexpr std::array<double, 14> kBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
      0.025,  0.05,    0.1,    0.25,  0.5,    1,     10};

  std::array<uint64_t, kBounds.size() + 1> counts{};
  double sum_seconds = 0;

  void Add(double seconds) {
    size_t b = 0;
    while (b < kBounds.size() && seconds > kBounds[b]) ++b;
    ++counts[b];
    sum_seconds += seconds;
  }
  uint64_t count() const {
    uint64_t n = 0;
    for (uint64_t c : counts) n += c;
    return n;
  }
};

}  // namespace flotilla::base

#endif  // FLOTILLA_SHARED_BASE_LATENCY_COUNTS_H_
