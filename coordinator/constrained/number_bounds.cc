#include "coordinator/constrained/number_bounds.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace flotilla::coordinator::constrained {
namespace {

constexpr int64_t kMaxMagnitude = 999999999999999999;  // 18 digits

// The magnitudes of the integers in range with this sign, as [lo, hi]
// (lo > hi: none). Zero is positive only (no "-0").
void MagnitudeRange(const NumberBounds& b, bool negative, int64_t* lo,
                    int64_t* hi) {
  if (!negative) {
    *lo = std::max<int64_t>(b.lo_int, 0);
    *hi = std::min<int64_t>(b.hi_int, kMaxMagnitude);
  } else {
    *lo = b.hi_int >= 0 ? 1 : std::max<int64_t>(-b.hi_int, 1);
    *hi = b.lo_int >= 0               ? 0
          : b.lo_int < -kMaxMagnitude ? kMaxMagnitude
                                      : -b.lo_int;
  }
}

bool InRealRange(const NumberBounds& b, double v) {
  if (b.lo_open ? !(v > b.lo) : !(v >= b.lo)) return false;
  if (b.hi_open ? !(v < b.hi) : !(v <= b.hi)) return false;
  return true;
}

int Digits(uint64_t m) {
  int d = 1;
  while (m >= 10) {
    m /= 10;
    ++d;
  }
  return d;
}

}  // namespace

bool NumberBounds::HoldsReal(double v) const {
  return !bounded || InRealRange(*this, v);
}

bool NumberBounds::Holds(bool negative, uint64_t magnitude) const {
  if (negative && magnitude == 0) return false;
  const double v = negative ? -static_cast<double>(magnitude)
                            : static_cast<double>(magnitude);
  int64_t lo_m, hi_m;
  MagnitudeRange(*this, negative, &lo_m, &hi_m);
  return static_cast<int64_t>(magnitude) >= lo_m &&
         static_cast<int64_t>(magnitude) <= hi_m && InRealRange(*this, v);
}

int NumberBounds::DigitsToEnd(bool negative, uint64_t magnitude, int digits,
                              int max_digits) const {
  int64_t lo_m, hi_m;
  MagnitudeRange(*this, negative, &lo_m, &hi_m);
  if (lo_m > hi_m) return -1;
  if (digits == 0) {
    // Any first digit: the shortest magnitude in range.
    return Digits(static_cast<uint64_t>(lo_m));
  }
  if (magnitude == 0) {  // a leading 0 is the whole integer part
    return Holds(negative, 0) ? 0 : -1;
  }
  // Extending by j digits reaches [m * 10^j, m * 10^j + 10^j - 1].
  uint64_t low = magnitude, width = 1;
  for (int j = 0; digits + j <= max_digits; ++j) {
    const uint64_t high = low + width - 1;
    if (static_cast<int64_t>(low) <= hi_m &&
        static_cast<int64_t>(high) >= lo_m) {
      if (j > 0) return j;
      if (Holds(negative, magnitude)) return 0;
    }
    if (low > static_cast<uint64_t>(kMaxMagnitude) / 10) break;
    low *= 10;
    width *= 10;
  }
  return -1;
}

bool NumberBounds::Reachable(bool negative, uint64_t magnitude, int digits,
                             int max_digits) const {
  return DigitsToEnd(negative, magnitude, digits, max_digits) >= 0;
}

bool NumberBounds::FractionFits(bool negative, uint64_t magnitude) const {
  const double i = static_cast<double>(magnitude);
  // Positive: values in [i, i + 1); negative: (-(i + 1), -i].
  const double from = negative ? -(i + 1) : i, to = negative ? -i : i + 1;
  const bool lo_ok = negative ? from >= lo : (lo_open ? from > lo : from >= lo);
  const bool hi_ok = negative ? (hi_open ? to < hi : to <= hi) : to <= hi;
  return lo_ok && hi_ok;
}

int64_t NumberBounds::ShortestBytes() const {
  int64_t best = INT64_MAX;
  for (bool negative : {false, true}) {
    const int d = DigitsToEnd(negative, 0, 0, 18);
    if (d > 0) best = std::min<int64_t>(best, d + (negative ? 1 : 0));
  }
  return best == INT64_MAX ? 1 : best;
}

absl::Status AddBound(const std::string& key, const nlohmann::ordered_json& v,
                      NumberBounds* b) {
  if (!v.is_number() || !std::isfinite(v.get<double>())) {
    return absl::InvalidArgumentError(key + " must be a finite number");
  }
  const double x = v.get<double>();
  b->bounded = true;
  if (key == "minimum" || key == "exclusiveMinimum") {
    const bool open = key == "exclusiveMinimum";
    if (x > b->lo || (x == b->lo && open)) {
      b->lo = x;
      b->lo_open = open;
    }
  } else {
    const bool open = key == "exclusiveMaximum";
    if (x < b->hi || (x == b->hi && open)) {
      b->hi = x;
      b->hi_open = open;
    }
  }
  return absl::OkStatus();
}

absl::Status FinishBounds(NumberBounds* b) {
  if (!b->bounded) return absl::OkStatus();
  const double limit = static_cast<double>(kMaxMagnitude);
  double lo = std::ceil(b->lo), hi = std::floor(b->hi);
  if (b->lo_open && lo == b->lo) lo += 1;
  if (b->hi_open && hi == b->hi) hi -= 1;
  lo = std::max(lo, -limit);
  hi = std::min(hi, limit);
  if (lo > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("minimum/maximum leave no integer in range (", b->lo, "..",
                     b->hi, "); constrained decoding needs one"));
  }
  b->lo_int = static_cast<int64_t>(lo);
  b->hi_int = static_cast<int64_t>(hi);
  return absl::OkStatus();
}

}  // namespace flotilla::coordinator::constrained
