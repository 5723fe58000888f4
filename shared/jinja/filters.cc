// Jinja's builtin filters, as published chat templates use them. Names and
// parameters follow Jinja 3.1; tojson follows transformers' override
// (json.dumps with ensure_ascii=False unless asked).
#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "shared/base/status_macros.h"
#include "shared/jinja/builtins.h"

namespace flotilla::jinja::internal {
namespace {

// Jinja's attribute paths ("a.b.0"): item lookup per part.
absl::StatusOr<Value> AttributePath(const Value& v, const std::string& path) {
  Value cur = v;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    Value key = Value::String(std::string(part));
    int64_t index = 0;
    if (!part.empty() && std::all_of(part.begin(), part.end(), ::isdigit) &&
        absl::SimpleAtoi(part, &index)) {
      key = Value::Int(index);
    }
    if (cur.is_undefined()) return cur;
    FLOTILLA_ASSIGN_OR_RETURN(cur, GetItem(cur, key));
  }
  return cur;
}

// Python's ordering for sort/dictsort/min/max: numbers by value, strings
// by code point (lowercased unless case-sensitive).
absl::StatusOr<bool> Less(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_number() && b.is_number()) return a.as_number() < b.as_number();
  if (a.is_string() && b.is_string()) {
    if (case_sensitive) return a.as_string() < b.as_string();
    return absl::AsciiStrToLower(a.as_string()) <
           absl::AsciiStrToLower(b.as_string());
  }
  if (a.is_bool() && b.is_bool()) return a.as_int() < b.as_int();
  return absl::InvalidArgumentError(absl::StrCat(
      "'<' not supported between ", a.TypeName(), " and ", b.TypeName()));
}

absl::StatusOr<std::vector<Value>> SortValues(std::vector<Value> items,
                                              bool reverse, bool case_sensitive,
                                              const Value& attribute) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& v : items) {
    Value key = v;
    if (attribute.is_string()) {
      FLOTILLA_ASSIGN_OR_RETURN(key, AttributePath(v, attribute.as_string()));
    }
    keyed.emplace_back(std::move(key), std::move(v));
  }
  absl::Status error;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    absl::StatusOr<bool> less =
        reverse ? Less(y.first, x.first, case_sensitive)
                : Less(x.first, y.first, case_sensitive);
    if (!less.ok()) error = less.status();
    return less.ok() && *less;
  });
  if (!error.ok()) return error;
  std::vector<Value> out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return out;
}

// select/reject/selectattr/rejectattr.
absl::StatusOr<Value> SelectFilter(const Value& input, CallArgs& args,
                                   bool by_attribute, bool keep) {
  FLOTILLA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      return absl::InvalidArgumentError("selectattr/rejectattr need an attribute");
    }
    attribute = args.positional[next++].as_string();
  }
  std::string test;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) {
      return absl::InvalidArgumentError("the test name must be a string");
    }
    test = args.positional[next++].as_string();
  }
  Value::List out;
  for (const Value& item : items) {
    Value subject = item;
    if (by_attribute) {
      FLOTILLA_ASSIGN_OR_RETURN(subject, AttributePath(item, attribute));
    }
    bool pass = subject.Truthy();
    if (!test.empty()) {
      CallArgs test_args;
      test_args.positional.assign(args.positional.begin() + next,
                                  args.positional.end());
      FLOTILLA_ASSIGN_OR_RETURN(pass, CallTest(test, subject, test_args));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> MapFilter(const Value& input, CallArgs& args) {
  FLOTILLA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
  Value::List out;
  for (const auto& [k, v] : args.keyword) {
    if (k != "attribute" && k != "default") {
      return absl::InvalidArgumentError("map() got an unexpected keyword '" +
                                        k + "'");
    }
  }
  Value attribute, dflt;
  for (const auto& [k, v] : args.keyword) (k == "attribute" ? attribute : dflt) = v;
  if (attribute.is_string()) {
    for (const Value& item : items) {
      FLOTILLA_ASSIGN_OR_RETURN(Value got,
                                AttributePath(item, attribute.as_string()));
      out.push_back(got.is_undefined() && !dflt.is_undefined() ? dflt : got);
    }
    return Value::MakeList(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return absl::InvalidArgumentError("map() needs a filter name or attribute=");
  }
  const std::string filter = args.positional[0].as_string();
  for (const Value& item : items) {
    CallArgs filter_args;
    filter_args.positional.assign(args.positional.begin() + 1,
                                  args.positional.end());
    FLOTILLA_ASSIGN_OR_RETURN(Value got, CallFilter(filter, item, filter_args));
    out.push_back(std::move(got));
  }
  return Value::MakeList(std::move(out));
}

absl::StatusOr<Value> ToJsonFilter(const Value& input, CallArgs& call) {
  ArgReader args(call, "tojson",
                 {"ensure_ascii", "indent", "separators", "sort_keys"});
  FLOTILLA_RETURN_IF_ERROR(args.Check());
  if (!args.Get(2).is_undefined() && !args.Get(2).is_none()) {
    return absl::InvalidArgumentError("tojson(separators=...) is not supported");
  }
  const Value indent = args.Get(1);
  if (!indent.is_undefined() && !indent.is_none() &&
      (!indent.is_int() || indent.as_int() < 0 || indent.as_int() > 64)) {
    return absl::InvalidArgumentError("tojson indent must be an integer in 0..64");
  }
  if (input.is_undefined()) return UndefinedError(input);
  FLOTILLA_ASSIGN_OR_RETURN(
      std::string text,
      PythonJsonDumps(input, args.Get(0).Truthy(),
                      indent.is_int() ? static_cast<int>(indent.as_int()) : -1,
                      args.Get(3).Truthy()));
  return Value::String(std::move(text));
}

std::string Indent(const std::string& s, const Value& width, bool first,
                   bool blank) {
  const int64_t spaces =
      width.is_int() ? std::clamp<int64_t>(width.as_int(), 0, 1024) : 4;
  const std::string pad =
      width.is_string() ? width.as_string() : std::string(spaces, ' ');
  std::vector<std::string> lines = absl::StrSplit(s, '\n');
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    const bool indent = (i > 0 || first) && (blank || !lines[i].empty());
    if (indent) out += pad;
    out += lines[i];
  }
  return out;
}

}  // namespace

absl::StatusOr<Value> CallFilter(const std::string& name, const Value& input,
                                 CallArgs& call) {
  if (name == "tojson") return ToJsonFilter(input, call);
  if (name == "map") return MapFilter(input, call);
  if (name == "select" || name == "reject") {
    return SelectFilter(input, call, false, name == "select");
  }
  if (name == "selectattr" || name == "rejectattr") {
    return SelectFilter(input, call, true, name == "selectattr");
  }
  if (name == "default" || name == "d") {
    ArgReader args(call, name, {"default_value", "boolean"});
    FLOTILLA_RETURN_IF_ERROR(args.Check());
    const bool use = input.is_undefined() ||
                     (args.Get(1).Truthy() && !input.Truthy());
    if (!use) return input;
    return args.Has(0) ? args.Get(0) : Value::String("");
  }
  if (name == "length" || name == "count") {
    FLOTILLA_ASSIGN_OR_RETURN(int64_t n, Length(input));
    return Value::Int(n);
  }
  if (name == "string") return Value::String(input.Str());
  if (name == "safe") return input;
  if (name == "e" || name == "escape") {
    return Value::String(absl::StrReplaceAll(
        input.Str(), {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"},
                      {"\"", "&#34;"}, {"'", "&#39;"}}));
  }
  if (name == "trim") {
    ArgReader args(call, name, {"chars"});
    FLOTILLA_RETURN_IF_ERROR(args.Check());
    CallArgs strip;
    if (args.Has(0)) strip.positional.push_back(args.Get(0));
    FLOTILLA_ASSIGN_OR_RETURN(Value method,
                              GetAttribute(Value::String(input.Str()), "strip"));
    return method.function()(strip);
  }
  if (name == "upper" || name == "lower" || name == "title" ||
      name == "capitalize") {
    FLOTILLA_ASSIGN_OR_RETURN(Value method,
                              GetAttribute(Value::String(input.Str()), name));
    CallArgs none;
    return method.function()(none);
  }
  if (name == "replace") {
    ArgReader args(call, name, {"old", "new", "count"});
    FLOTILLA_RETURN_IF_ERROR(args.Check());
    FLOTILLA_ASSIGN_OR_RETURN(
        Value method, GetAttribute(Value::String(input.Str()), "replace"));
    CallArgs pass;
    for (size_t i = 0; i < 3; ++i) {
      if (args.Has(i)) pass.positional.push_back(args.Get(i));
    }
    return method.function()(pass);
  }
  if (name == "join") {
    ArgReader args(call, name, {"d", "attribute"});
    FLOTILLA_RETURN_IF_ERROR(args.Check());
    FLOTILLA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
    std::vector<std::string> parts;
    for (const Value& v : items) {
      Value part = v;
      if (args.Get(1).is_string()) {
        FLOTILLA_ASSIGN_OR_RETURN(part, AttributePath(v, args.Get(1).as_string()));
      }
      parts.push_back(part.Str());
      if (JoinedSize(parts, 0) > kMaxBuiltBytes) return TooLarge();
    }
    const std::string separator = args.Get(0).Str();
    if (JoinedSize(parts, separator.size()) > kMaxBuiltBytes) return TooLarge();
    return Value::String(absl::StrJoin(parts, separator));
  }
  if (name == "first" || name == "last") {
    FLOTILLA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
    if (items.empty()) return Value::Undefined("no " + name + " item");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    FLOTILLA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
    return Value::MakeList(std::move(items));
  }
  if (name == "reverse") {
    if (input.is_string()) {
      std::vector<uint32_t> cps = DecodeUtf8(input.as_string());
      std::reverse(cps.begin(), cps.end());
      return Value::String(EncodeUtf8(cps, 0, cps.size()));
    }
    FLOTILLA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
    std::reverse(items.begin(), items.end());
    return Value::MakeList(std::move(items));
  }
  if (name == "items" || name == "dictsort") {
    if (input.is_undefined()) return Value::MakeList();
    if (!input.is_dict() || input.is_namespace()) {
      return absl::InvalidArgumentError(name + " expects a mapping");
    }
    ArgReader args(call, name, {"case_sensitive", "by", "reverse"});
    FLOTILLA_RETURN_IF_ERROR(args.Check());
    std::vector<Value> pairs;
    for (const auto& [k, v] : input.dict()) {
      pairs.push_back(Value::MakeList({Value::String(k), v}, true));
    }
    if (name == "items") return Value::MakeList(std::move(pairs));
    const bool by_value = args.Get(1).Str() == "value";
    FLOTILLA_ASSIGN_OR_RETURN(
        pairs, SortValues(std::move(pairs), args.Get(2).Truthy(),
                          args.Get(0).Truthy(),
                          Value::String(by_value ? "1" : "0")));
    return Value::MakeList(std::move(pairs));
  }
  if (name == "sort") {
    ArgReader args(call, name, {"reverse", "case_sensitive", "attribute"});
    FLOTILLA_RETURN_IF_ERROR(args.Check());
    FLOTILLA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
    FLOTILLA_ASSIGN_OR_RETURN(
        items, SortValues(std::move(items), args.Get(0).Truthy(),
                          args.Get(1).Truthy(), args.Get(2)));
    return Value::MakeList(std::move(items));
  }
  if (name == "unique") {
    FLOTILLA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
    Value::List out;
    for (const Value& v : items) {
      if (std::none_of(out.begin(), out.end(),
                       [&](const Value& o) { return o.Equals(v); })) {
        out.push_back(v);
      }
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "int" || name == "float") {
    ArgReader args(call, name, {"default"});
    const Value dflt =
        args.Has(0) ? args.Get(0)
                    : (name == "int" ? Value::Int(0) : Value::Float(0));
    double d = 0;
    if (input.is_number() || input.is_bool()) {
      d = input.as_number();
    } else if (input.is_string()) {
      char* end = nullptr;
      d = std::strtod(input.as_string().c_str(), &end);
      if (input.as_string().empty() || *end != '\0') return dflt;
    } else {
      return dflt;
    }
    if (name == "int") {
      if (input.is_int()) return input;
      if (!(d > -9.2e18 && d < 9.2e18)) return dflt;  // NaN or out of range
      return Value::Int(static_cast<int64_t>(std::trunc(d)));
    }
    return Value::Float(d);
  }
  if (name == "abs") {
    if (input.is_int() && input.as_int() == INT64_MIN) {
      return absl::InvalidArgumentError("integer overflow in abs");
    }
    if (input.is_int()) return Value::Int(std::llabs(input.as_int()));
    if (input.is_float()) return Value::Float(std::fabs(input.as_number()));
    return absl::InvalidArgumentError("abs() needs a number");
  }
  if (name == "round") {
    ArgReader args(call, name, {"precision", "method"});
    const double scale =
        std::pow(10.0, args.Get(0).is_int() ? args.Get(0).as_int() : 0);
    const std::string method = args.Has(1) ? args.Get(1).Str() : "common";
    const double x = input.as_number() * scale;
    const double r = method == "ceil"    ? std::ceil(x)
                     : method == "floor" ? std::floor(x)
                                         : std::round(x);
    return Value::Float(r / scale);
  }
  if (name == "indent") {
    ArgReader args(call, name, {"width", "first", "blank"});
    FLOTILLA_RETURN_IF_ERROR(args.Check());
    const std::string text = input.Str();
    const Value width = args.Get(0);
    const size_t pad = width.is_string() ? width.as_string().size()
                       : width.is_int()
                           ? std::clamp<int64_t>(width.as_int(), 0, 1024)
                           : 4;  // Indent()'s widths
    const size_t lines = std::count(text.begin(), text.end(), '\n') + 1;
    if (pad > 0 &&
        lines >
            (kMaxBuiltBytes - std::min(text.size(), kMaxBuiltBytes)) / pad) {
      return TooLarge();
    }
    return Value::String(
        Indent(text, width, args.Get(1).Truthy(), args.Get(2).Truthy()));
  }
  if (name == "wordcount") {
    CallArgs none;
    FLOTILLA_ASSIGN_OR_RETURN(Value method,
                              GetAttribute(Value::String(input.Str()), "split"));
    FLOTILLA_ASSIGN_OR_RETURN(Value words, method.function()(none));
    return Value::Int(static_cast<int64_t>(words.list().size()));
  }
  if (name == "min" || name == "max" || name == "sum") {
    ArgReader args(call, name, name == "sum"
                                   ? std::vector<std::string>{"attribute", "start"}
                                   : std::vector<std::string>{"case_sensitive",
                                                              "attribute"});
    FLOTILLA_RETURN_IF_ERROR(args.Check());
    FLOTILLA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(input));
    if (name == "sum") {
      Value total = args.Has(1) ? args.Get(1) : Value::Int(0);
      for (const Value& v : items) {
        Value x = v;
        if (args.Get(0).is_string()) {
          FLOTILLA_ASSIGN_OR_RETURN(x, AttributePath(v, args.Get(0).as_string()));
        }
        if (!x.is_number() || !total.is_number()) {
          return absl::InvalidArgumentError("sum() needs numbers");
        }
        total = total.is_int() && x.is_int()
                    ? Value::Int(total.as_int() + x.as_int())
                    : Value::Float(total.as_number() + x.as_number());
      }
      return total;
    }
    if (items.empty()) return Value::Undefined("empty sequence");
    FLOTILLA_ASSIGN_OR_RETURN(
        items, SortValues(std::move(items), name == "max", args.Get(0).Truthy(),
                          args.Get(1)));
    return items.front();
  }
  if (name == "attr") {
    if (call.positional.size() != 1 || !call.positional[0].is_string()) {
      return absl::InvalidArgumentError("attr() takes one attribute name");
    }
    return GetAttribute(input, call.positional[0].as_string());
  }
  return absl::InvalidArgumentError(absl::StrCat("no filter named '", name, "'"));
}

}  // namespace flotilla::jinja::internal
