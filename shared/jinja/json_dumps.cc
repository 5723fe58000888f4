// json.dumps as Python writes it: ", " and ": " between items unless an
// indent is given (then "," and newlines), floats by repr(), non-ASCII kept
// or escaped as \uXXXX (surrogate pairs past U+FFFF) by ensure_ascii.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "shared/jinja/budget.h"
#include "shared/jinja/value.h"

namespace flotilla::jinja {
namespace {

void AppendEscapedUnit(std::string* out, uint32_t unit) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\u%04x", unit);
  *out += buf;
}

void AppendJsonString(std::string* out, const std::string& s,
                      bool ensure_ascii) {
  *out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      if (!ensure_ascii) {
        *out += static_cast<char>(c);
        ++i;
        continue;
      }
      // Decode one UTF-8 sequence (the input is valid UTF-8).
      int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
      uint32_t cp = c & (0x7f >> len);
      for (int k = 1; k < len && i + k < s.size(); ++k) {
        cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
      }
      i += len;
      if (cp >= 0x10000) {
        cp -= 0x10000;
        AppendEscapedUnit(out, 0xd800 + (cp >> 10));
        AppendEscapedUnit(out, 0xdc00 + (cp & 0x3ff));
      } else {
        AppendEscapedUnit(out, cp);
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
          AppendEscapedUnit(out, c);
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

absl::Status Dump(const Value& v, bool ensure_ascii, int indent,
                  bool sort_keys, int depth, std::string* out) {
  WalkLevel walk;  // charged to the render's budget, when there is one
  if (!walk.ok()) return Budget::Current()->status();
  const std::string item_sep = indent < 0 ? ", " : ",";
  auto newline = [&](int level) {
    if (indent >= 0) absl::StrAppend(out, "\n", std::string(indent * level, ' '));
  };
  switch (v.kind()) {
    case Value::Kind::kNone:
      *out += "null";
      return absl::OkStatus();
    case Value::Kind::kBool:
      *out += v.as_bool() ? "true" : "false";
      return absl::OkStatus();
    case Value::Kind::kInt:
      absl::StrAppend(out, v.as_int());
      return absl::OkStatus();
    case Value::Kind::kFloat: {
      const double d = v.as_number();
      if (std::isnan(d)) {
        *out += "NaN";
      } else if (std::isinf(d)) {
        *out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        *out += PythonFloatRepr(d);
      }
      return absl::OkStatus();
    }
    case Value::Kind::kString:
      AppendJsonString(out, v.as_string(), ensure_ascii);
      return absl::OkStatus();
    case Value::Kind::kList: {
      if (v.list().empty()) {
        *out += "[]";
        return absl::OkStatus();
      }
      *out += '[';
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i > 0) *out += item_sep;
        newline(depth + 1);
        absl::Status s = Dump(v.list()[i], ensure_ascii, indent, sort_keys,
                              depth + 1, out);
        if (!s.ok()) return s;
        if (!walk.Fits(out->size())) return Budget::Current()->status();
      }
      newline(depth);
      *out += ']';
      return absl::OkStatus();
    }
    case Value::Kind::kDict: {
      if (v.is_namespace()) {
        return absl::InvalidArgumentError(
            "Object of type Namespace is not JSON serializable");
      }
      if (v.dict().empty()) {
        *out += "{}";
        return absl::OkStatus();
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& item : v.dict()) items.push_back(&item);
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      }
      *out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += item_sep;
        newline(depth + 1);
        AppendJsonString(out, items[i]->first, ensure_ascii);
        *out += ": ";
        absl::Status s = Dump(items[i]->second, ensure_ascii, indent,
                              sort_keys, depth + 1, out);
        if (!s.ok()) return s;
        if (!walk.Fits(out->size())) return Budget::Current()->status();
      }
      newline(depth);
      *out += '}';
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "Object of type ", v.TypeName(), " is not JSON serializable"));
  }
}

}  // namespace

absl::StatusOr<std::string> PythonJsonDumps(const Value& v, bool ensure_ascii,
                                            int indent, bool sort_keys) {
  std::string out;
  absl::Status s = Dump(v, ensure_ascii, indent, sort_keys, 0, &out);
  if (!s.ok()) return s;
  return out;
}

}  // namespace flotilla::jinja
