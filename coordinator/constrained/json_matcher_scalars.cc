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

JsonMatcher::Step JsonMatcher::NumberStep(Frame& f, char c) {
  const bool digit = std::isdigit(static_cast<unsigned char>(c));
  const bool integer_only = !(schema_->node(f.node).types & kNumber);
  const bool exponent = (c == 'e' || c == 'E') && !integer_only;
  auto go = [&](uint8_t phase, int64_t count) {
    f.phase = phase;
    f.count = count;
    return kTaken;
  };
  switch (f.phase) {
    case 0:
      if (c == '-') return go(1, 0);
      [[fallthrough]];
    case 1:
      if (c == '0') return go(2, 1);
      if (digit) return go(3, 1);
      return kRejected;
    case 2:
    case 3:
      if (f.phase == 3 && digit && f.count < kMaxIntegerDigits) {
        return go(3, f.count + 1);
      }
      if (c == '.' && !integer_only) return go(4, 0);
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
  return IsNumberEnd(f.phase) ? kPopAndRetry : kRejected;
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

bool JsonMatcher::CanEnd() const {
  if (stack_.empty()) return true;
  if (stack_.size() != 1) return false;
  const Frame& f = stack_.back();
  if (f.kind == Kind::kNumber) return IsNumberEnd(f.phase);
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
