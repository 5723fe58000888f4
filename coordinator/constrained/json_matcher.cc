#include "coordinator/constrained/json_matcher.h"

#include <algorithm>
#include <cctype>

namespace flotilla::coordinator::constrained {
namespace {

uint64_t AllBits(size_t n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

}  // namespace

JsonMatcher::JsonMatcher(const CompiledSchema* schema) : schema_(schema) {
  PushValue(schema->root());
}

void JsonMatcher::PushValue(int node) {
  Frame f;
  f.kind = Kind::kValue;
  f.node = node;
  stack_.push_back(f);
}

const std::vector<std::string>& JsonMatcher::Texts(const Frame& f) const {
  const SchemaNode& n = schema_->node(f.node);
  return f.keys ? n.property_keys : n.literals;
}

int JsonMatcher::ValueNode(const Frame& object, int property) const {
  const SchemaNode& n = schema_->node(object.node);
  if (property < 0) return n.additional;
  if (n.tool_call && property == 1 && object.selected >= 0) {
    return n.tool_arguments[object.selected];
  }
  return n.property_nodes[property];
}

void JsonMatcher::PushKey(Frame& object) {
  const SchemaNode& n = schema_->node(object.node);
  Frame key;
  key.keys = true;
  key.node = object.node;
  if (n.tool_call) {
    key.kind = Kind::kLiteral;
    key.alive = object.seen == 0 ? 1 : 2;
  } else if (n.additional < 0) {
    key.kind = Kind::kLiteral;
    key.alive = AllBits(n.property_keys.size()) & ~object.seen;
  } else {
    key.kind = Kind::kString;  // phase 0: the opening quote is due
    key.alive = AllBits(n.property_keys.size());
  }
  stack_.push_back(key);
}

bool JsonMatcher::Pop() {
  const Frame child = stack_.back();
  stack_.pop_back();
  if (stack_.empty()) return true;
  Frame& parent = stack_.back();
  if (parent.kind == Kind::kObject) {
    const SchemaNode& n = schema_->node(parent.node);
    if (parent.phase == kKey) {
      if (child.current >= 0 && (parent.seen >> child.current & 1)) {
        return false;  // a key given twice
      }
      if (child.current < 0 && n.additional < 0) return false;
      parent.current = child.current;
      parent.phase = kColon;
    } else {
      if (n.tool_call && parent.current == 0) parent.selected = child.current;
      if (parent.current >= 0) parent.seen |= uint64_t{1} << parent.current;
      parent.phase = kAfterValue;
    }
  } else if (parent.kind == Kind::kArray) {
    ++parent.count;
    parent.phase = kAfterItem;
  }
  return true;
}

bool JsonMatcher::Feed(char c) {
  while (!stack_.empty()) {
    switch (FeedTop(c)) {
      case kTaken:
        return true;
      case kTakenDone:
        return Pop();
      case kRejected:
        return false;
      case kRetry:
        break;
      case kPopAndRetry:
        if (!Pop()) return false;
        break;
    }
  }
  return false;  // the value is complete: nothing may follow
}

bool JsonMatcher::FeedAll(absl::string_view text) {
  for (char c : text) {
    if (!Feed(c)) return false;
  }
  return true;
}

JsonMatcher::Step JsonMatcher::FeedTop(char c) {
  Frame& f = stack_.back();
  switch (f.kind) {
    case Kind::kValue:
      return StartValue(f, c);
    case Kind::kObject:
      return ObjectStep(f, c);
    case Kind::kArray:
      return ArrayStep(f, c);
    case Kind::kString:
      return StringStep(f, c);
    case Kind::kNumber:
      return NumberStep(f, c);
    case Kind::kLiteral:
      return LiteralStep(f, c);
  }
  return kRejected;
}

JsonMatcher::Step JsonMatcher::StartValue(Frame& f, char c) {
  const SchemaNode& n = schema_->node(f.node);
  if (c == ' ') {
    if (f.ws > 0) return kRejected;
    f.ws = 1;
    return kTaken;
  }
  if (!n.any_of.empty()) {
    for (int alt : n.any_of) {
      if (schema_->node(alt).first_bytes.find(c) != std::string::npos) {
        f.node = alt;
        return kRetry;
      }
    }
    return kRejected;
  }
  Frame fresh;
  fresh.node = f.node;
  if (n.has_literals) {
    fresh.kind = Kind::kLiteral;
    fresh.alive = AllBits(n.literals.size());
    f = fresh;
    return kRetry;
  }
  if (c == '{' && (n.types & kObject)) {
    fresh.kind = Kind::kObject;
    f = fresh;
    return kTaken;
  }
  if (c == '[' && (n.types & kArray)) {
    fresh.kind = Kind::kArray;
    f = fresh;
    return kTaken;
  }
  if (c == '"' && (n.types & kString)) {
    fresh.kind = Kind::kString;
    fresh.phase = 1;
    f = fresh;
    return kTaken;
  }
  if ((c == '-' || std::isdigit(static_cast<unsigned char>(c))) &&
      (n.types & (kNumber | kInteger))) {
    fresh.kind = Kind::kNumber;
    f = fresh;
    return kRetry;
  }
  if ((c == 't' || c == 'f') && (n.types & kBoolean)) {
    fresh.kind = Kind::kLiteral;
    fresh.node = CompiledSchema::kBooleanLiterals;
    fresh.alive = 3;
    f = fresh;
    return kRetry;
  }
  if (c == 'n' && (n.types & kNull)) {
    fresh.kind = Kind::kLiteral;
    fresh.node = CompiledSchema::kNullLiteral;
    fresh.alive = 1;
    f = fresh;
    return kRetry;
  }
  return kRejected;
}

JsonMatcher::Step JsonMatcher::ObjectStep(Frame& f, char c) {
  const SchemaNode& n = schema_->node(f.node);
  if (c == ' ' && f.phase != kKey && f.phase != kInValue) {
    if (f.ws > 0) return kRejected;
    f.ws = 1;
    return kTaken;
  }
  const uint64_t all = AllBits(n.property_keys.size());
  const bool more_keys = n.tool_call ? f.seen != 3
                         : n.additional < 0 ? (all & ~f.seen) != 0
                                            : true;
  const bool complete = (n.required & ~f.seen) == 0;
  switch (f.phase) {
    case kOpen:
    case kComma:
      if (c == '"' && more_keys) {
        f.phase = kKey;
        f.ws = 0;
        PushKey(f);
        return kRetry;
      }
      if (c == '}' && f.phase == kOpen && complete) return kTakenDone;
      return kRejected;
    case kColon:
      if (c != ':') return kRejected;
      f.phase = kInValue;
      f.ws = 0;
      PushValue(ValueNode(f, f.current));
      return kTaken;
    case kAfterValue:
      if (c == ',' && more_keys) {
        f.phase = kComma;
        f.ws = 0;
        return kTaken;
      }
      if (c == '}' && complete) return kTakenDone;
      return kRejected;
    default:
      return kRejected;
  }
}

JsonMatcher::Step JsonMatcher::ArrayStep(Frame& f, char c) {
  const SchemaNode& n = schema_->node(f.node);
  switch (f.phase) {
    case kArrayOpen:
      if (c == ']' && n.min_items == 0) return kTakenDone;
      if (n.max_items == 0) return kRejected;
      f.phase = kInItem;
      PushValue(n.items);
      return kRetry;
    case kAfterItem:
      if (c == ' ' && f.ws == 0) {
        f.ws = 1;
        return kTaken;
      }
      if (c == ',' && (n.max_items < 0 || f.count < n.max_items)) {
        f.phase = kArrayComma;
        f.ws = 0;
        return kTaken;
      }
      if (c == ']' && f.count >= n.min_items) return kTakenDone;
      return kRejected;
    case kArrayComma:
      f.phase = kInItem;
      PushValue(n.items);
      return kRetry;
    default:
      return kRejected;
  }
}

}  // namespace flotilla::coordinator::constrained
