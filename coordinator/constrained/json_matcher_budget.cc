// JsonMatcher::MinBytesToEnd: the fewest bytes that complete the value
// from the current state, frame by frame from the innermost out. The mask
// keeps it within the tokens left so the value closes before max_tokens.
#include <algorithm>

#include "coordinator/constrained/json_matcher.h"

namespace flotilla::coordinator::constrained {
int64_t JsonMatcher::MinValue(const Frame& object, int property) const {
  const SchemaNode& n = schema_->node(object.node);
  if (n.tool_call && property == 1 && object.selected < 0) {
    int64_t best = INT64_MAX;
    for (int a : n.tool_arguments) best = std::min(best, schema_->node(a).min_bytes);
    return best;
  }
  return schema_->node(ValueNode(object, property)).min_bytes;
}

int64_t JsonMatcher::CostOf(const Frame& object, uint64_t missing) const {
  const SchemaNode& n = schema_->node(object.node);
  int64_t bytes = 1;  // '}'
  for (size_t i = 0; i < n.property_keys.size(); ++i) {
    if (!(missing >> i & 1)) continue;
    bytes += 1 + static_cast<int64_t>(n.property_keys[i].size()) + 1 +
             MinValue(object, static_cast<int>(i));
  }
  return bytes;
}

int64_t JsonMatcher::ObjectNeed(const Frame& f, const Frame* key) const {
  const SchemaNode& n = schema_->node(f.node);
  const uint64_t missing = n.required & ~f.seen;
  switch (f.phase) {
    case kOpen:
      return missing == 0 ? 1 : CostOf(f, missing) - 1;
    case kKey: {
      // The key being written and the rest, together: which key it becomes
      // decides which required properties are still missing.
      int64_t best = INT64_MAX;
      if (key != nullptr) {
        const std::vector<std::string>& texts = n.property_keys;
        for (size_t i = 0; i < texts.size(); ++i) {
          if (!(key->alive >> i & 1)) continue;
          const uint64_t bit = uint64_t{1} << i;
          const int64_t rest = static_cast<int64_t>(texts[i].size()) - key->pos;
          best = std::min(best, rest + 1 + MinValue(f, static_cast<int>(i)) +
                                    CostOf(f, missing & ~bit));
        }
        if (key->kind == Kind::kString) {  // any other key
          const int64_t close = (key->phase == 0 ? 2 : 1) +
                                (key->esc == 1 ? 1 : key->esc >= 3 ? key->esc - 2 : 0) +
                                std::max(0, key->pending);
          best = std::min(best, close + 1 +
                                    schema_->node(n.additional).min_bytes +
                                    CostOf(f, missing));
        }
      }
      return best == INT64_MAX ? CostOf(f, missing) : best;
    }
    case kColon: {
      const uint64_t bit = f.current >= 0 ? uint64_t{1} << f.current : 0;
      return 1 + MinValue(f, f.current) + CostOf(f, missing & ~bit);
    }
    case kInValue: {
      const uint64_t bit = f.current >= 0 ? uint64_t{1} << f.current : 0;
      return CostOf(f, missing & ~bit);
    }
    case kAfterValue:
      return CostOf(f, missing);
    case kComma: {
      if (missing != 0) return CostOf(f, missing) - 1;
      // One more property must follow the comma: the cheapest one.
      int64_t best = INT64_MAX;
      const uint64_t open = n.tool_call ? (f.seen == 1 ? 2 : 0) : ~f.seen;
      for (size_t i = 0; i < n.property_keys.size(); ++i) {
        if (open >> i & 1) {
          best = std::min(best, CostOf(f, uint64_t{1} << i) - 1);
        }
      }
      if (!n.tool_call && n.additional >= 0) {
        best = std::min(best, 2 + 1 + schema_->node(n.additional).min_bytes + 1);
      }
      return best == INT64_MAX ? 1 : best;
    }
  }
  return 1;
}

int64_t JsonMatcher::ArrayNeed(const Frame& f) const {
  const SchemaNode& n = schema_->node(f.node);
  const int64_t item = schema_->node(n.items).min_bytes;
  switch (f.phase) {
    case kArrayOpen: {
      const int64_t m = n.min_items;
      return m == 0 ? 1 : m * item + (m - 1) + 1;
    }
    case kInItem: {
      const int64_t left = std::max<int64_t>(0, n.min_items - f.count - 1);
      return left * (1 + item) + 1;
    }
    case kAfterItem: {
      const int64_t left = std::max<int64_t>(0, n.min_items - f.count);
      return left * (1 + item) + 1;
    }
    default: {
      const int64_t left = std::max<int64_t>(1, n.min_items - f.count);
      return left * item + (left - 1) + 1;
    }
  }
}

int64_t JsonMatcher::MinBytesToEnd() const {
  int64_t total = 0;
  const Frame* key = nullptr;
  for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) {
    const Frame& f = *it;
    switch (f.kind) {
      case Kind::kValue:
        total += schema_->node(f.node).min_bytes;
        break;
      case Kind::kString:
        if (f.keys) {
          key = &f;
          break;
        }
        total += (f.phase == 0 ? 1 : 0) +
                 (f.esc == 1 ? 1 : f.esc >= 3 ? f.esc - 2 : 0) + std::max(0, f.pending) +
                 std::max<int64_t>(0, schema_->node(f.node).min_length - f.count -
                                          (f.esc != 0 || f.pending != 0 ? 1 : 0)) +
                 1;
        break;
      case Kind::kLiteral: {
        if (f.keys) {
          key = &f;
          break;
        }
        int64_t best = INT64_MAX;
        const std::vector<std::string>& texts = Texts(f);
        for (size_t i = 0; i < texts.size(); ++i) {
          if (f.alive >> i & 1) {
            best = std::min(best, static_cast<int64_t>(texts[i].size()) - f.pos);
          }
        }
        total += best == INT64_MAX ? 0 : best;
        break;
      }
      case Kind::kNumber:
        total += NumberNeed(f);
        break;
      case Kind::kObject:
        total += ObjectNeed(f, key);
        key = nullptr;
        break;
      case Kind::kArray:
        total += ArrayNeed(f);
        break;
    }
  }
  return total;
}

}  // namespace flotilla::coordinator::constrained
