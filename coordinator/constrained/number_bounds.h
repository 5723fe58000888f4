// minimum / maximum / exclusiveMinimum / exclusiveMaximum of a JSON schema
// number or integer, as the matcher enforces them while the digits are
// written: a digit is allowed only while some value in range can still be
// reached from the digits so far, and the number may end only in range.
// The integer part is what is tracked (at most 18 digits); a bounded
// number writes no exponent, and a fraction only where every value of its
// integer part's unit interval is in range (conservative: 1.5 under a
// maximum of 1.7 is not offered; an integer part in range always is).
#ifndef FLOTILLA_COORDINATOR_CONSTRAINED_NUMBER_BOUNDS_H_
#define FLOTILLA_COORDINATOR_CONSTRAINED_NUMBER_BOUNDS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator::constrained {

struct NumberBounds {
  bool bounded = false;
  // The real bounds (for ending after a fraction and the '.' check).
  double lo = -1e308, hi = 1e308;
  bool lo_open = false, hi_open = false;
  // The integers in range, as the digits' target (lo_int <= hi_int).
  int64_t lo_int = INT64_MIN, hi_int = INT64_MAX;

  // Whether `v` is in range (always, unbounded).
  bool HoldsReal(double v) const;
  // Whether the integer `negative ? -magnitude : magnitude` is in range.
  bool Holds(bool negative, uint64_t magnitude) const;
  // Whether a value in range is reachable from an integer part of
  // `digits` digits (0: none written yet) of `magnitude` and this sign,
  // with at most `max_digits` digits in all; a leading 0 takes no more.
  bool Reachable(bool negative, uint64_t magnitude, int digits,
                 int max_digits) const;
  // The fewest digits still to write before the number may end in range
  // (0: it may end now); -1 when none reach.
  int DigitsToEnd(bool negative, uint64_t magnitude, int digits,
                  int max_digits) const;
  // Whether a fraction may follow this integer part: every value of the
  // unit interval it starts is in range.
  bool FractionFits(bool negative, uint64_t magnitude) const;
  // Bytes of the shortest number in range ("7", "-12", "1000").
  int64_t ShortestBytes() const;
};

// Reads a schema's bound keywords into `b` (one keyword per call; `key` is
// one of the four). InvalidArgument naming the keyword for a non-number.
absl::Status AddBound(const std::string& key, const nlohmann::ordered_json& v,
                      NumberBounds* b);
// After every keyword: the integer range, rounded inward. InvalidArgument
// when it holds no integer (a bounded number with no integer in range is
// not supported) or past 18 digits.
absl::Status FinishBounds(NumberBounds* b);

}  // namespace flotilla::coordinator::constrained

#endif  // FLOTILLA_COORDINATOR_CONSTRAINED_NUMBER_BOUNDS_H_
