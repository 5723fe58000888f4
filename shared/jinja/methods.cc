// Attribute access: namespace attributes, dict entries, and the Python
// str and dict methods chat templates call (strip, split, startswith,
// items, get, ...). List methods that change a list (append, pop) are
// absent, as in transformers' immutable sandbox.
#include <algorithm>
#include <cctype>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "shared/jinja/builtins.h"

namespace flotilla::jinja::internal {
namespace {

constexpr char kWhitespace[] = " \t\n\r\f\v";

std::string Strip(const std::string& s, const Value& chars, bool left,
                  bool right) {
  const std::string set = chars.is_string() ? chars.as_string() : kWhitespace;
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e && set.find(s[b]) != std::string::npos) ++b;
  }
  if (right) {
    while (e > b && set.find(s[e - 1]) != std::string::npos) --e;
  }
  return s.substr(b, e - b);
}

absl::StatusOr<Value> Split(const std::string& s, const Value& sep,
                            const Value& maxsplit_v) {
  const int64_t maxsplit = maxsplit_v.is_int() ? maxsplit_v.as_int() : -1;
  Value::List parts;
  if (!sep.is_string()) {  // runs of whitespace, no empty parts
    size_t i = 0;
    int64_t splits = 0;
    while (true) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) {
        ++i;
      }
      if (i >= s.size()) break;
      if (maxsplit >= 0 && splits == maxsplit) {
        size_t e = s.size();
        while (e > i && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
        parts.push_back(Value::String(s.substr(i, e - i)));
        break;
      }
      size_t j = i;
      while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) {
        ++j;
      }
      parts.push_back(Value::String(s.substr(i, j - i)));
      ++splits;
      i = j;
    }
    return Value::MakeList(std::move(parts));
  }
  const std::string& d = sep.as_string();
  if (d.empty()) return absl::InvalidArgumentError("empty separator");
  size_t start = 0;
  int64_t splits = 0;
  while (true) {
    const size_t at = (maxsplit >= 0 && splits >= maxsplit)
                          ? std::string::npos
                          : s.find(d, start);
    if (at == std::string::npos) {
      parts.push_back(Value::String(s.substr(start)));
      break;
    }
    parts.push_back(Value::String(s.substr(start, at - start)));
    start = at + d.size();
    ++splits;
  }
  return Value::MakeList(std::move(parts));
}

std::string Title(const std::string& s) {
  std::string out = s;
  bool prev_letter = false;
  for (char& c : out) {
    const bool letter = std::isalpha(static_cast<unsigned char>(c));
    if (letter) c = prev_letter ? std::tolower(c) : std::toupper(c);
    prev_letter = letter;
  }
  return out;
}

absl::StatusOr<bool> AffixMatches(const std::string& s, const Value& affix,
                                  bool prefix) {
  std::vector<Value> options;
  if (affix.is_string()) {
    options.push_back(affix);
  } else if (affix.is_tuple()) {
    options = affix.list();
  } else {
    return absl::InvalidArgumentError(
        "startswith/endswith take a string or a tuple of strings");
  }
  for (const Value& o : options) {
    if (!o.is_string()) {
      return absl::InvalidArgumentError(
          "startswith/endswith take a string or a tuple of strings");
    }
    if (prefix ? absl::StartsWith(s, o.as_string())
               : absl::EndsWith(s, o.as_string())) {
      return true;
    }
  }
  return false;
}

// str methods; undefined when `name` is not one.
Value StringMethod(const Value& str, const std::string& name) {
  struct Method {
    const char* name;
    std::vector<std::string> params;
  };
  static const auto* kMethods = new std::vector<Method>{
      {"strip", {"chars"}},      {"lstrip", {"chars"}},
      {"rstrip", {"chars"}},     {"split", {"sep", "maxsplit"}},
      {"startswith", {"prefix"}}, {"endswith", {"suffix"}},
      {"upper", {}},             {"lower", {}},
      {"title", {}},             {"capitalize", {}},
      {"replace", {"old", "new", "count"}},
      {"find", {"sub"}},         {"count", {"sub"}},
      {"join", {"iterable"}},    {"splitlines", {}},
      {"isdigit", {}},           {"isalpha", {}},
      {"isspace", {}}};
  const Method* method = nullptr;
  for (const Method& m : *kMethods) {
    if (name == m.name) method = &m;
  }
  if (method == nullptr) return Value::Undefined("str has no attribute " + name);
  const std::vector<std::string> params = method->params;
  return Value::MakeFunction(
      "str." + name,
      [str, name, params](CallArgs& call) -> absl::StatusOr<Value> {
        // The bound string is shared with `str`, not copied.
        const std::string& s = str.as_string();
        ArgReader args(call, name, params);
        if (absl::Status st = args.Check(); !st.ok()) return st;
        const Value a0 = args.Get(0), a1 = args.Get(1), a2 = args.Get(2);
        if (name == "strip") return Value::String(Strip(s, a0, true, true));
        if (name == "lstrip") return Value::String(Strip(s, a0, true, false));
        if (name == "rstrip") return Value::String(Strip(s, a0, false, true));
        if (name == "split") return Split(s, a0, a1);
        if (name == "startswith" || name == "endswith") {
          absl::StatusOr<bool> m = AffixMatches(s, a0, name == "startswith");
          if (!m.ok()) return m.status();
          return Value::Bool(*m);
        }
        if (name == "upper" || name == "lower") {
          std::string out = s;
          for (char& c : out)
            c = name == "upper" ? std::toupper(c) : std::tolower(c);
          return Value::String(out);
        }
        if (name == "title") return Value::String(Title(s));
        if (name == "capitalize") {
          std::string out = s;
          for (char& c : out) c = std::tolower(c);
          if (!out.empty()) out[0] = std::toupper(out[0]);
          return Value::String(out);
        }
        if (!a0.is_undefined() && !a0.is_string() && name != "join") {
          return absl::InvalidArgumentError(
              absl::StrCat("str.", name, "() takes a string"));
        }
        if (name == "replace") {
          if (!a1.is_string()) {
            return absl::InvalidArgumentError("str.replace() takes strings");
          }
          // What the result would weigh, before building it.
          const std::string& from = a0.as_string();
          const std::string& to = a1.as_string();
          const int64_t limit = a2.is_int() && a2.as_int() >= 0
                                    ? a2.as_int()
                                    : std::numeric_limits<int64_t>::max();
          uint64_t hits = 0;
          if (from.empty()) {
            hits = std::min<uint64_t>(DecodeUtf8(s).size() + 1, limit);
          } else {
            for (size_t at = s.find(from);
                 at != std::string::npos && hits < static_cast<uint64_t>(limit);
                 at = s.find(from, at + from.size())) {
              ++hits;
            }
          }
          if (to.size() > from.size() &&
              (to.size() - from.size()) * hits >
                  kMaxBuiltBytes - std::min(s.size(), kMaxBuiltBytes)) {
            return TooLarge();
          }
          if (from.empty()) {
            // Python: `to` before each character (up to count) and, when
            // the count allows, at the end.
            const std::vector<uint32_t> cps = DecodeUtf8(s);
            std::string out;
            uint64_t done = 0;
            for (size_t i = 0; i < cps.size(); ++i) {
              if (done < hits) {
                out += to;
                ++done;
              }
              AppendUtf8(&out, cps[i]);
            }
            if (done < hits) out += to;
            return Value::String(std::move(out));
          }
          if (a2.is_int() && a2.as_int() >= 0) {
            std::string out = s;
            size_t at = 0;
            for (int64_t n = 0; n < a2.as_int(); ++n) {
              at = out.find(a0.as_string(), at);
              if (at == std::string::npos || a0.as_string().empty()) break;
              out.replace(at, a0.as_string().size(), a1.as_string());
              at += a1.as_string().size();
            }
            return Value::String(out);
          }
          return Value::String(
              absl::StrReplaceAll(s, {{a0.as_string(), a1.as_string()}}));
        }
        if (name == "find") {
          const size_t at = s.find(a0.as_string());
          if (at == std::string::npos) return Value::Int(-1);
          return Value::Int(static_cast<int64_t>(
              DecodeUtf8(s.substr(0, at)).size()));
        }
        if (name == "count") {
          if (a0.as_string().empty()) {
            return Value::Int(static_cast<int64_t>(DecodeUtf8(s).size()) + 1);
          }
          int64_t n = 0;
          for (size_t at = s.find(a0.as_string()); at != std::string::npos;
               at = s.find(a0.as_string(), at + a0.as_string().size())) {
            ++n;
          }
          return Value::Int(n);
        }
        if (name == "join") {
          absl::StatusOr<std::vector<Value>> items = Iterate(a0);
          if (!items.ok()) return items.status();
          std::vector<std::string> parts;
          for (const Value& v : *items) {
            if (!v.is_string()) {
              return absl::InvalidArgumentError(absl::StrCat(
                  "str.join() expected str, found ", v.TypeName()));
            }
            parts.push_back(v.as_string());
          }
          if (JoinedSize(parts, s.size()) > kMaxBuiltBytes) return TooLarge();
          return Value::String(absl::StrJoin(parts, s));
        }
        if (name == "splitlines") {
          Value::List lines;
          for (absl::string_view line : absl::StrSplit(s, '\n')) {
            lines.push_back(Value::String(std::string(line)));
          }
          if (!s.empty() && s.back() == '\n') lines.pop_back();
          if (s.empty()) lines.clear();
          return Value::MakeList(std::move(lines));
        }
        bool all = !s.empty();
        for (unsigned char c : s) {
          all &= name == "isdigit"   ? std::isdigit(c) != 0
                 : name == "isalpha" ? std::isalpha(c) != 0
                                     : std::isspace(c) != 0;
        }
        return Value::Bool(all);
      });
}

Value DictMethod(const Value& d, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    return Value::MakeFunction(
        "dict." + name, [d, name](CallArgs& call) -> absl::StatusOr<Value> {
          ArgReader args(call, name, {});
          if (absl::Status st = args.Check(); !st.ok()) return st;
          Value::List out;
          for (const auto& [k, v] : d.dict()) {
            if (name == "items") {
              out.push_back(Value::MakeList({Value::String(k), v}, true));
            } else {
              out.push_back(name == "keys" ? Value::String(k) : v);
            }
          }
          return Value::MakeList(std::move(out));
        });
  }
  if (name == "get") {
    return Value::MakeFunction(
        "dict.get", [d](CallArgs& call) -> absl::StatusOr<Value> {
          ArgReader args(call, "get", {"key", "default"});
          if (absl::Status st = args.Check(); !st.ok()) return st;
          const Value key = args.Get(0);
          if (key.is_string()) {
            if (const Value* found = d.Find(key.as_string())) return *found;
          }
          return args.Has(1) ? args.Get(1) : Value::None();
        });
  }
  return Value::Undefined(absl::StrCat("dict object has no attribute '", name,
                                       "'"));
}

}  // namespace

absl::StatusOr<Value> GetAttribute(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      return UndefinedError(obj);
    case Value::Kind::kDict: {
      if (obj.is_namespace()) {
        if (const Value* found = obj.Find(name)) return *found;
        return Value::Undefined("namespace has no attribute " + name);
      }
      if (name == "items" || name == "keys" || name == "values" ||
          name == "get") {
        return DictMethod(obj, name);
      }
      if (const Value* found = obj.Find(name)) return *found;
      return Value::Undefined(
          absl::StrCat("dict object has no attribute '", name, "'"));
    }
    case Value::Kind::kString:
      return StringMethod(obj, name);
    default:
      return Value::Undefined(absl::StrCat(obj.TypeName(),
                                           " object has no attribute '", name,
                                           "'"));
  }
}

}  // namespace flotilla::jinja::internal
