// An incremental matcher of JSON text against a CompiledSchema, one byte
// at a time: Feed() says whether a byte may come next, so a token mask
// (token_constraint.h) can try each token's bytes on a copy. The text it
// accepts always parses and validates: compact JSON with at most one space
// between tokens, numbers of bounded length (18 integer digits, 16
// fraction digits, 2 exponent digits), strings of valid UTF-8.
// MinBytesToEnd() is the fewest bytes that complete the value from here,
// which lets the mask close the value before max_tokens runs out.
#ifndef FLOTILLA_COORDINATOR_CONSTRAINED_JSON_MATCHER_H_
#define FLOTILLA_COORDINATOR_CONSTRAINED_JSON_MATCHER_H_

#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "coordinator/constrained/json_schema.h"

namespace flotilla::coordinator::constrained {

class JsonMatcher {
 public:
  // Expects one value of `schema`'s root; `schema` must outlive it.
  explicit JsonMatcher(const CompiledSchema* schema);

  // Takes `c` when it may come next and returns true; otherwise returns
  // false and the matcher must not be used again (feed a copy to test).
  bool Feed(char c);
  bool FeedAll(absl::string_view text);

  // The text so far is one complete value (a number may still grow).
  bool CanEnd() const;
  // Complete, and nothing may follow.
  bool Done() const { return stack_.empty(); }
  int64_t MinBytesToEnd() const;
  // Inside a string value (not a key) between characters (no escape or
  // UTF-8 sequence open): its characters so far and its length bounds
  // (max -1: none). Then a run of plain characters (no quote, backslash or
  // control byte; whole UTF-8 sequences) is taken iff it keeps the count
  // within the maximum, and lowers MinBytesToEnd by what it pays of the
  // minimum (the mask's fast path, token_constraint.cc).
  bool InPlainString(int64_t* count, int64_t* min_length,
                     int64_t* max_length) const;

 private:
  enum class Kind : uint8_t { kValue, kObject, kArray, kString, kNumber, kLiteral };
  struct Frame {
    Kind kind;
    uint8_t phase = 0;
    uint8_t ws = 0;        // spaces taken in the current gap (at most one)
    uint8_t esc = 0;       // string: 1 after a backslash, 3..6: hex digits
                           // due plus 2
    // string: the range of the next UTF-8 continuation byte (narrower
    // after E0, ED, F0 and F4: no overlong forms, surrogates or code
    // points past U+10FFFF, which JSON parsers refuse).
    uint8_t cont_lo = 0x80, cont_hi = 0xbf;
    bool keys = false;     // string/literal: an object key
    int32_t node;          // schema node (the object's, for keys)
    int32_t current = -1;  // object: the property being read (-1: other);
                           // literal: the candidate that completed
    int32_t selected = -1; // tool call: index of the chosen tool
    int32_t pos = 0;       // literal/key: bytes matched
    int32_t pending = 0;   // string: UTF-8 continuation bytes still due
    int64_t count = 0;     // array items, string characters, digits
    uint64_t seen = 0;     // object: properties given
    uint64_t alive = 0;    // literal/key: candidates still matching
  };
  enum Step { kTaken, kTakenDone, kRejected, kRetry, kPopAndRetry };
  // Frame::phase of objects and arrays (the matcher's files share them).
  enum ObjectPhase : uint8_t { kOpen, kKey, kColon, kInValue, kAfterValue, kComma };
  enum ArrayPhase : uint8_t { kArrayOpen, kInItem, kAfterItem, kArrayComma };
  // A number's phases where it may end: after 0, integer digits, fraction
  // digits or exponent digits (json_matcher_scalars.cc's NumberStep).
  static bool IsNumberEnd(uint8_t phase) {
    return phase == 2 || phase == 3 || phase == 5 || phase == 8;
  }

  Step FeedTop(char c);
  Step StartValue(Frame& f, char c);
  Step ObjectStep(Frame& f, char c);
  Step ArrayStep(Frame& f, char c);
  Step StringStep(Frame& f, char c);
  Step NumberStep(Frame& f, char c);
  // Whether the number in `f` may end here (its grammar, and its bounds).
  bool NumberMayEnd(const Frame& f) const;
  // The fewest bytes before the number in `f` may end (the budget's).
  int64_t NumberNeed(const Frame& f) const;
  Step LiteralStep(Frame& f, char c);
  // Pops the top frame (complete) and advances its parent.
  bool Pop();
  void PushValue(int node);
  void PushKey(Frame& object);

  const std::vector<std::string>& Texts(const Frame& f) const;
  int ValueNode(const Frame& object, int property) const;
  // Fewest bytes of the value of `property` (-1: another key).
  int64_t MinValue(const Frame& object, int property) const;
  // Bytes to add the given missing properties to an object, each as
  // `,"key":value`, plus the closing brace.
  int64_t CostOf(const Frame& object, uint64_t missing) const;
  int64_t ObjectNeed(const Frame& f, const Frame* key) const;
  int64_t ArrayNeed(const Frame& f) const;

  const CompiledSchema* schema_;
  absl::InlinedVector<Frame, 12> stack_;
};

}  // namespace flotilla::coordinator::constrained

#endif  // FLOTILLA_COORDINATOR_CONSTRAINED_JSON_MATCHER_H_
