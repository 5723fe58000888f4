// The matcher's scalar frames: strings (escapes, UTF-8, lengths, object
// keys), numbers (JSON's grammar with bounded digit counts) and literals
// (enums, true/false/null, closed objects' keys), and CanEnd.
#include <cctype>

#include "coordinator/constrained/json_matcher.h"

namespace flotilla::coordinator::constrained {
namespace {

constexpr int kMaxIntegerDigits = 18;
constexpr int kMaxFractionDigits = 16;
constexpr int kMaxExponentDigits = 2;  // 1e99 and beyond fit a double

}  // namespace

JsonMatcher::Step JsonMatcher::StringStep(Frame& f, char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  if (f.keys) {  // which declared keys the raw text still matches
    const std::vector<std::string>& texts = Texts(f);
    uint64_t alive = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      if ((f.alive >> i & 1) && static_cast<size_t>(f.pos) < texts[i].size() &&
          texts[i][f.pos] == c) {
        alive |= uint64_t{1} << i;
      }
    }
    f.alive = alive;
    ++f.pos;
  }
  if (f.phase == 0) {
    if (c != '"') return kRejected;
    f.phase = 1;
    return kTaken;
  }
  const SchemaNode& n = schema_->node(f.node);
  const int64_t min_length = f.keys ? 0 : n.min_length;
  const int64_t max_length = f.keys ? -1 : n.max_length;
  if (f.esc == 1) {
    if (c == 'u') {
      f.esc = 6;
      return kTaken;
    }
    if (std::string("\"\\/bfnrt").find(c) == std::string::npos) return kRejected;
    f.esc = 0;
    ++f.count;
    return kTaken;
  }
  if (f.esc >= 3) {
    if (!std::isxdigit(u)) return kRejected;
    // No surrogate escapes (\uD800-\uDFFF): a lone one does not parse;
    // characters past U+FFFF come as UTF-8 bytes instead.
    if (f.esc == 6) f.pending = (c == 'd' || c == 'D') ? -1 : 0;
    if (f.esc == 5) {
      if (f.pending == -1 && !(c >= '0' && c <= '7')) return kRejected;
      f.pending = 0;
    }
    if (--f.esc == 2) {
      f.esc = 0;
      ++f.count;
    }
    return kTaken;
  }
  if (f.pending > 0) {
    if (u < f.cont_lo || u > f.cont_hi) return kRejected;
    f.cont_lo = 0x80;
    f.cont_hi = 0xbf;
    if (--f.pending == 0) ++f.count;
    return kTaken;
  }
  if (c == '"') {
    if (f.count < min_length) return kRejected;
    if (f.keys) {
      f.current = -1;
      const std::vector<std::string>& texts = Texts(f);
      for (size_t i = 0; i < texts.size(); ++i) {
        if ((f.alive >> i & 1) && texts[i].size() == static_cast<size_t>(f.pos)) {
          f.current = static_cast<int32_t>(i);
        }
      }
    }
    return kTakenDone;
  }
  if (max_length >= 0 && f.count >= max_length) return kRejected;
  if (c == '\\') {
    f.esc = 1;
  } else if (u < 0x20) {
    return kRejected;
  } else if (u < 0x80) {
    ++f.count;
  } else if (u >= 0xc2 && u <= 0xdf) {
    f.pending = 1;
  } else if (u >= 0xe0 && u <= 0xef) {
    f.pending = 2;
    if (u == 0xe0) f.cont_lo = 0xa0;  // not overlong
    if (u == 0xed) f.cont_hi = 0x9f;  // not a surrogate
  } else if (u >= 0xf0 && u <= 0xf4) {
    f.pending = 3;
    if (u == 0xf0) f.cont_lo = 0x90;  // not overlong
    if (u == 0xf4) f.cont_hi = 0x8f;  // not past U+10FFFF
  } else {
    return kRejected;
  }
  return kTaken;
}

// A number frame: f.seen holds the integer part's magnitude, f.current is
// 1 after a minus sign; with bounds (number_bounds.h) a digit is taken only
// while a value in range stays reachable, and the number ends only in
// range.
JsonMatcher::Step JsonMatcher::NumberStep(Frame& f, char c) {
  const bool digit = std::isdigit(static_cast<unsigned char>(c));
  const SchemaNode& node = schema_->node(f.node);
  const bool integer_only = !(node.types & kNumber);
  const NumberBounds& b = node.bounds;
  const bool bounded = b.bounded;
  const bool negative = f.current == 1;
  // Bounded numbers write no exponent: their value is read off the digits.
  const bool exponent = (c == 'e' || c == 'E') && !integer_only && !bounded;
  auto go = [&](uint8_t phase, int64_t count) {
    f.phase = phase;
    f.count = count;
    return kTaken;
  };
  auto digit_to = [&](uint8_t phase, uint64_t magnitude, int64_t count) {
    if (bounded && !b.Reachable(negative, magnitude, static_cast<int>(count),
                                kMaxIntegerDigits)) {
      return kRejected;
    }
    f.seen = magnitude;
    return go(phase, count);
  };
  switch (f.phase) {
    case 0:
      if (c == '-') {
        if (bounded && !b.Reachable(true, 0, 0, kMaxIntegerDigits)) {
          return kRejected;
        }
        f.current = 1;
        return go(1, 0);
      }
      [[fallthrough]];
    case 1:
      if (c == '0') return digit_to(2, 0, 1);
      if (digit) return digit_to(3, static_cast<uint64_t>(c - '0'), 1);
      return kRejected;
    case 2:
    case 3:
      if (f.phase == 3 && digit && f.count < kMaxIntegerDigits) {
        return digit_to(3, f.seen * 10 + static_cast<uint64_t>(c - '0'),
                        f.count + 1);
      }
      if (c == '.' && !integer_only &&
          (!bounded || b.FractionFits(negative, f.seen))) {
        return go(4, 0);
      }
      if (exponent) return go(6, 0);
      break;
    case 4:
      return digit ? go(5, 1) : kRejected;
    case 5:
      if (digit && f.count < kMaxFractionDigits) return go(5, f.count + 1);
      if (exponent) return go(6, 0);
      break;
    case 6:
      if (c == '+' || c == '-') return go(7, 0);
      [[fallthrough]];
    case 7:
      return digit ? go(8, 1) : kRejected;
    case 8:
      if (digit && f.count < kMaxExponentDigits) return go(8, f.count + 1);
      break;
  }
  return NumberMayEnd(f) ? kPopAndRetry : kRejected;
}

bool JsonMatcher::NumberMayEnd(const Frame& f) const {
  if (!IsNumberEnd(f.phase)) return false;
  const NumberBounds& b = schema_->node(f.node).bounds;
  // After a fraction the '.' check already placed the value in range.
  if (!b.bounded || f.phase >= 5) return true;
  return b.Holds(f.current == 1, f.seen);
}

int64_t JsonMatcher::NumberNeed(const Frame& f) const {
  const NumberBounds& b = schema_->node(f.node).bounds;
  if (!b.bounded) return IsNumberEnd(f.phase) ? 0 : 1;
  if (f.phase <= 3) {
    const int d = b.DigitsToEnd(f.current == 1, f.phase <= 1 ? 0 : f.seen,
                                f.phase <= 1 ? 0 : static_cast<int>(f.count),
                                kMaxIntegerDigits);
    return d < 0 ? 1 : d;
  }
  return IsNumberEnd(f.phase) ? 0 : 1;
}

JsonMatcher::Step JsonMatcher::LiteralStep(Frame& f, char c) {
  const std::vector<std::string>& texts = Texts(f);
  uint64_t alive = 0;
  int complete = -1;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!(f.alive >> i & 1)) continue;
    if (texts[i].size() == static_cast<size_t>(f.pos)) complete = static_cast<int>(i);
    if (static_cast<size_t>(f.pos) < texts[i].size() && texts[i][f.pos] == c) {
      alive |= uint64_t{1} << i;
    }
  }
  if (alive == 0) {
    if (complete < 0) return kRejected;
    f.current = complete;  // e.g. enum [1, 10] after "1"
    return kPopAndRetry;
  }
  f.alive = alive;
  ++f.pos;
  bool longer = false;
  complete = -1;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!(alive >> i & 1)) continue;
    if (texts[i].size() == static_cast<size_t>(f.pos)) {
      complete = static_cast<int>(i);
    } else {
      longer = true;
    }
  }
  if (complete >= 0 && !longer) {
    f.current = complete;
    return kTakenDone;
  }
  return kTaken;
}

bool JsonMatcher::InPlainString(int64_t* count, int64_t* min_length,
                                int64_t* max_length) const {
  if (stack_.empty()) return false;
  const Frame& f = stack_.back();
  if (f.kind != Kind::kString || f.keys || f.phase != 1 || f.esc != 0 ||
      f.pending != 0) {
    return false;
  }
  const SchemaNode& n = schema_->node(f.node);
  *count = f.count;
  *min_length = n.min_length;
  *max_length = n.max_length;
  return true;
}

bool JsonMatcher::CanEnd() const {
  if (stack_.empty()) return true;
  if (stack_.size() != 1) return false;
  const Frame& f = stack_.back();
  if (f.kind == Kind::kNumber) return NumberMayEnd(f);
  if (f.kind == Kind::kLiteral) {
    const std::vector<std::string>& texts = Texts(f);
    for (size_t i = 0; i < texts.size(); ++i) {
      if ((f.alive >> i & 1) && texts[i].size() == static_cast<size_t>(f.pos)) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace flotilla::coordinator::constrained
