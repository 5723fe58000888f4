// Jinja's tests (`x is string`) and the globals chat templates call.
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/jinja/budget.h"
#include "shared/jinja/builtins.h"

namespace flotilla::jinja::internal {
namespace {

absl::StatusOr<bool> Compare(const std::string& op, const Value& a,
                             const Value& b) {
  if (op == "eq" || op == "equalto" || op == "==") return a.Equals(b);
  if (op == "ne" || op == "!=") return !a.Equals(b);
  if (!(a.is_number() || a.is_bool()) || !(b.is_number() || b.is_bool())) {
    if (a.is_string() && b.is_string()) {
      const int c = a.as_string().compare(b.as_string());
      if (op == "lt" || op == "<") return c < 0;
      if (op == "le" || op == "<=") return c <= 0;
      if (op == "gt" || op == ">") return c > 0;
      return c >= 0;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("'", op, "' not supported between instances of '",
                     a.TypeName(), "' and '", b.TypeName(), "'"));
  }
  const double x = a.as_number(), y = b.as_number();
  if (op == "lt" || op == "<") return x < y;
  if (op == "le" || op == "<=") return x <= y;
  if (op == "gt" || op == ">") return x > y;
  return x >= y;
}

}  // namespace

absl::StatusOr<bool> CallTest(const std::string& name, const Value& v,
                              CallArgs& call) {
  const Value arg = call.positional.empty() ? Value() : call.positional[0];
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number() || v.is_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "mapping") return v.is_dict() && !v.is_namespace();
  if (name == "sequence") {
    return v.is_list() || v.is_string() || (v.is_dict() && !v.is_namespace());
  }
  if (name == "iterable") {
    return v.is_undefined() || v.is_list() || v.is_string() ||
           (v.is_dict() && !v.is_namespace());
  }
  if (name == "callable") return v.is_function();
  if (name == "odd" || name == "even") {
    if (!v.is_int()) return absl::InvalidArgumentError(name + " needs an integer");
    const bool odd = (v.as_int() % 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "divisibleby") {
    if (!v.is_int() || !arg.is_int() || arg.as_int() == 0) {
      return absl::InvalidArgumentError("divisibleby needs non-zero integers");
    }
    return v.as_int() % arg.as_int() == 0;
  }
  if (name == "lower" || name == "upper") {
    const std::string s = v.Str();
    for (char c : s) {
      if (name == "lower" ? std::isupper(static_cast<unsigned char>(c))
                          : std::islower(static_cast<unsigned char>(c))) {
        return false;
      }
    }
    return true;
  }
  if (name == "sameas") {
    if (v.is_list() || v.is_dict()) {
      return v.kind() == arg.kind() && v.Equals(arg) &&
             (v.is_list() ? &v.list() == &arg.list() : &v.dict() == &arg.dict());
    }
    return v.kind() == arg.kind() && v.Equals(arg);
  }
  if (name == "in") {
    if (arg.is_string() && v.is_string()) {
      return arg.as_string().find(v.as_string()) != std::string::npos;
    }
    FLOTILLA_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(arg));
    for (const Value& item : items) {
      if (item.Equals(v)) return true;
    }
    return false;
  }
  for (const char* op : {"eq", "equalto", "==", "ne", "!=", "lt", "<", "le",
                         "<=", "gt", ">", "ge", ">="}) {
    if (name == op) return Compare(name, v, arg);
  }
  return absl::InvalidArgumentError(absl::StrCat("no test named '", name, "'"));
}

Value MakeGlobals(absl::Time now, absl::TimeZone zone) {
  Value::Dict g;
  g.emplace_back("range", Value::MakeFunction("range", [](CallArgs& call)
                                                  -> absl::StatusOr<Value> {
    std::vector<int64_t> a;
    for (const Value& v : call.positional) {
      if (!v.is_int()) return absl::InvalidArgumentError("range() needs integers");
      a.push_back(v.as_int());
    }
    if (a.empty() || a.size() > 3 || !call.keyword.empty()) {
      return absl::InvalidArgumentError("range() takes 1 to 3 integers");
    }
    const int64_t start = a.size() == 1 ? 0 : a[0];
    const int64_t stop = a.size() == 1 ? a[0] : a[1];
    const int64_t step = a.size() == 3 ? a[2] : 1;
    if (step == 0) return absl::InvalidArgumentError("range() step is zero");
    Value::List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      if (out.size() >= 1'000'000) {
        return absl::InvalidArgumentError("range() of over a million items");
      }
      out.push_back(Value::Int(i));
      if (__builtin_add_overflow(i, step, &i)) break;
    }
    return Value::MakeList(std::move(out));
  }));
  auto make_dict = [](bool ns) {
    return [ns](CallArgs& call) -> absl::StatusOr<Value> {
      Value out = Value::MakeDict({}, ns);
      for (const Value& p : call.positional) {
        if (!p.is_dict()) {
          return absl::InvalidArgumentError(
              "namespace()/dict() take a mapping and keyword arguments");
        }
        for (const auto& [k, v] : p.dict()) out.Set(k, v);
      }
      for (const auto& [k, v] : call.keyword) out.Set(k, v);
      // A namespace is the one value a template can change after making
      // it, so the one a value can come to hold itself through
      // ({% set ns.a = [ns] %}): emptied when the render ends, so that such
      // a cycle of shared pointers does not outlive it.
      if (Budget* budget = Budget::Current(); ns && budget != nullptr) {
        budget->AtEnd([out] { out.dict().clear(); });
      }
      return out;
    };
  };
  g.emplace_back("namespace", Value::MakeFunction("namespace", make_dict(true)));
  g.emplace_back("dict", Value::MakeFunction("dict", make_dict(false)));
  g.emplace_back("raise_exception",
                 Value::MakeFunction("raise_exception", [](CallArgs& call)
                                         -> absl::StatusOr<Value> {
                   const std::string message =
                       call.positional.empty() ? "" : call.positional[0].Str();
                   absl::Status s = absl::InvalidArgumentError(message);
                   s.SetPayload(kRaisedPayload, absl::Cord(message));
                   return s;
                 }));
  g.emplace_back("strftime_now",
                 Value::MakeFunction("strftime_now", [now, zone](CallArgs& call)
                                         -> absl::StatusOr<Value> {
                   if (call.positional.size() != 1 ||
                       !call.positional[0].is_string()) {
                     return absl::InvalidArgumentError(
                         "strftime_now() takes one format string");
                   }
                   return Value::String(absl::FormatTime(
                       call.positional[0].as_string(), now, zone));
                 }));
  return Value::MakeDict(std::move(g));
}

}  // namespace flotilla::jinja::internal
