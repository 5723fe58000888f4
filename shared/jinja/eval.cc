// Expressions with Python's semantics: `and`/`or` return an operand, `+`
// joins strings and lists but not a string and a number, `/` is true
// division, `//` and `%` floor, and any arithmetic on an undefined value
// is an error naming it.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/jinja/builtins.h"
#include "shared/jinja/render_internal.h"

namespace flotilla::jinja::internal {
namespace {

absl::Status TypeError(const std::string& op, const Value& a, const Value& b) {
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported operand type(s) for ", op, ": '", a.TypeName(),
                   "' and '", b.TypeName(), "'"));
}

bool Numeric(const Value& v) { return v.is_number() || v.is_bool(); }

absl::Status Overflow(const std::string& op) {
  return absl::InvalidArgumentError("integer overflow in " + op);
}

absl::StatusOr<Value> Arithmetic(const std::string& op, const Value& a,
                                 const Value& b) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.as_string().size() + b.as_string().size() > kMaxBuiltBytes) {
        return TooLarge();
      }
      return Value::String(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      if (a.list().size() + b.list().size() > kMaxBuiltItems) return TooLarge();
      Value::List items = a.list();
      items.insert(items.end(), b.list().begin(), b.list().end());
      return Value::MakeList(std::move(items), a.is_tuple());
    }
  }
  if (op == "*" && (a.is_string() || a.is_list()) && b.is_int()) {
    return Arithmetic(op, b, a);
  }
  if (op == "*" && a.is_int() && (b.is_string() || b.is_list())) {
    const int64_t n = std::max<int64_t>(0, a.as_int());
    const size_t unit = b.is_string() ? b.as_string().size() : b.list().size();
    const size_t cap = b.is_string() ? kMaxBuiltBytes : kMaxBuiltItems;
    if (unit > 0 && static_cast<uint64_t>(n) > cap / unit) return TooLarge();
    if (b.is_string()) {
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += b.as_string();
      return Value::String(std::move(out));
    }
    Value::List items;
    for (int64_t i = 0; i < n && unit > 0; ++i) {
      items.insert(items.end(), b.list().begin(), b.list().end());
    }
    return Value::MakeList(std::move(items), b.is_tuple());
  }
  if (!Numeric(a) || !Numeric(b)) return TypeError(op, a, b);
  const bool ints = !a.is_float() && !b.is_float();
  const double x = a.as_number(), y = b.as_number();
  int64_t r = 0;
  if (op == "+") {
    if (!ints) return Value::Float(x + y);
    if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) return Overflow(op);
    return Value::Int(r);
  }
  if (op == "-") {
    if (!ints) return Value::Float(x - y);
    if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) return Overflow(op);
    return Value::Int(r);
  }
  if (op == "*") {
    if (!ints) return Value::Float(x * y);
    if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) return Overflow(op);
    return Value::Int(r);
  }
  if ((op == "/" || op == "//" || op == "%") && y == 0) {
    return absl::InvalidArgumentError("division by zero");
  }
  if (op == "/") return Value::Float(x / y);
  if ((op == "//" || op == "%") && ints && b.as_int() == -1 &&
      a.as_int() == INT64_MIN) {
    return Overflow(op);
  }
  if (op == "//") {
    if (ints) {
      int64_t q = a.as_int() / b.as_int();
      if ((a.as_int() % b.as_int() != 0) && ((a.as_int() < 0) != (b.as_int() < 0))) --q;
      return Value::Int(q);
    }
    return Value::Float(std::floor(x / y));
  }
  if (op == "%") {
    if (ints) {
      int64_t r = a.as_int() % b.as_int();
      if (r != 0 && ((r < 0) != (b.as_int() < 0))) r += b.as_int();
      return Value::Int(r);
    }
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value::Float(r);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t p = 1;
      for (int64_t i = 0; i < b.as_int(); ++i) {
        if (__builtin_mul_overflow(p, a.as_int(), &p)) return Overflow(op);
        if (p == 0 || p == 1) break;
        if (p == -1) {
          if ((b.as_int() - i - 1) % 2 == 1) p = 1;
          break;
        }
      }
      return Value::Int(p);
    }
    return Value::Float(std::pow(x, y));
  }
  return TypeError(op, a, b);
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  if (container.is_undefined()) return UndefinedError(container);
  if (container.is_string()) {
    if (!item.is_string()) {
      return absl::InvalidArgumentError(
          "'in <string>' requires string as left operand");
    }
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_list()) {
    for (const Value& v : container.list()) {
      if (v.Equals(item)) return true;
    }
    return false;
  }
  if (container.is_dict() && !container.is_namespace()) {
    return item.is_string() && container.Find(item.as_string()) != nullptr;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "argument of type '", container.TypeName(), "' is not iterable"));
}

absl::StatusOr<bool> Order(const std::string& op, const Value& a,
                           const Value& b) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  int c;
  if (Numeric(a) && Numeric(b)) {
    c = a.as_number() < b.as_number() ? -1 : a.as_number() > b.as_number();
  } else if (a.is_string() && b.is_string()) {
    c = a.as_string().compare(b.as_string());
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("'", op, "' not supported between instances of '",
                     a.TypeName(), "' and '", b.TypeName(), "'"));
  }
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

}  // namespace

absl::StatusOr<CallArgs> Renderer::EvalArgs(const Expr& e, size_t first,
                                            Scope* scope) {
  CallArgs args;
  for (size_t i = first; i < e.children.size(); ++i) {
    FLOTILLA_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i], scope));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [k, expr] : e.kwargs) {
    FLOTILLA_ASSIGN_OR_RETURN(Value v, Eval(*expr, scope));
    args.keyword.emplace_back(k, std::move(v));
  }
  return args;
}

absl::StatusOr<Value> Renderer::EvalCall(const Expr& e, Scope* scope) {
  FLOTILLA_ASSIGN_OR_RETURN(Value callee, Eval(*e.children[0], scope));
  if (callee.is_undefined()) return UndefinedError(callee);
  if (!callee.is_function()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", callee.TypeName(), "' object is not callable"));
  }
  FLOTILLA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, scope));
  FLOTILLA_ASSIGN_OR_RETURN(Value result, callee.function()(args));
  return Charged(std::move(result));
}

absl::StatusOr<Value> Renderer::Charged(Value v) {
  // What building the value copied: a string's bytes (in 64-byte steps),
  // a list's or dict's items. Bounds the work of a loop that rebuilds a
  // growing value on every turn.
  int64_t work = 1;
  if (v.is_string()) work += static_cast<int64_t>(v.as_string().size() / 64);
  if (v.is_list()) work += static_cast<int64_t>(v.list().size());
  if (v.is_dict()) work += static_cast<int64_t>(v.dict().size());
  if (!budget_.Spend(work)) return budget_.status();
  return v;
}

absl::StatusOr<Value> Renderer::EvalBinary(const Expr& e, Scope* scope) {
  FLOTILLA_ASSIGN_OR_RETURN(Value a, Eval(*e.children[0], scope));
  if (e.name == "and") return a.Truthy() ? Eval(*e.children[1], scope) : a;
  if (e.name == "or") return a.Truthy() ? a : Eval(*e.children[1], scope);
  FLOTILLA_ASSIGN_OR_RETURN(Value b, Eval(*e.children[1], scope));
  if (e.name == "~") {
    std::string left = a.Str(), right = b.Str();
    if (left.size() + right.size() > kMaxBuiltBytes) return TooLarge();
    return Charged(Value::String(left + right));
  }
  FLOTILLA_ASSIGN_OR_RETURN(Value result, Arithmetic(e.name, a, b));
  return Charged(std::move(result));
}

absl::StatusOr<Value> Renderer::EvalCompare(const Expr& e, Scope* scope) {
  FLOTILLA_ASSIGN_OR_RETURN(Value left, Eval(*e.children[0], scope));
  for (size_t i = 0; i < e.ops.size(); ++i) {
    FLOTILLA_ASSIGN_OR_RETURN(Value right, Eval(*e.children[i + 1], scope));
    const std::string& op = e.ops[i];
    bool result;
    if (op == "==") {
      result = left.Equals(right);
    } else if (op == "!=") {
      result = !left.Equals(right);
    } else if (op == "in" || op == "not in") {
      FLOTILLA_ASSIGN_OR_RETURN(result, Contains(right, left));
      if (op == "not in") result = !result;
    } else {
      FLOTILLA_ASSIGN_OR_RETURN(result, Order(op, left, right));
    }
    if (!result) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

absl::StatusOr<Value> Renderer::Eval(const Expr& e, Scope* scope) {
  // Bounded so that no template, however its expressions and macro calls
  // nest, exhausts the stack.
  if (eval_depth_ >= options_.max_eval_depth) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "expressions evaluated deeper than ", options_.max_eval_depth,
        " levels (macro calls included)"));
  }
  ++eval_depth_;
  absl::StatusOr<Value> v = EvalNode(e, scope);
  --eval_depth_;
  if (v.ok() && budget_.spent()) return budget_.status();
  return v;
}

absl::StatusOr<Value> Renderer::EvalNode(const Expr& e, Scope* scope) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kName: {
      const Value* v = scope->Lookup(e.name);
      return v != nullptr ? *v : Value::Undefined(e.name);
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      Value::List items;
      for (const ExprPtr& c : e.children) {
        FLOTILLA_ASSIGN_OR_RETURN(Value v, Eval(*c, scope));
        items.push_back(std::move(v));
      }
      return Value::MakeList(std::move(items), e.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kDict: {
      Value out = Value::MakeDict();
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        FLOTILLA_ASSIGN_OR_RETURN(Value k, Eval(*e.children[i], scope));
        if (!k.is_string()) {
          return absl::InvalidArgumentError("dict keys must be strings");
        }
        FLOTILLA_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i + 1], scope));
        out.Set(k.as_string(), std::move(v));
      }
      return out;
    }
    case Expr::Kind::kAttr: {
      FLOTILLA_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], scope));
      return GetAttribute(obj, e.name);
    }
    case Expr::Kind::kItem: {
      FLOTILLA_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], scope));
      FLOTILLA_ASSIGN_OR_RETURN(Value key, Eval(*e.children[1], scope));
      return GetItem(obj, key);
    }
    case Expr::Kind::kSlice: {
      FLOTILLA_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], scope));
      Value parts[3];
      for (int i = 0; i < 3; ++i) {
        if (e.children[i + 1] != nullptr) {
          FLOTILLA_ASSIGN_OR_RETURN(parts[i], Eval(*e.children[i + 1], scope));
        }
      }
      return GetSlice(obj, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::kCall:
      return EvalCall(e, scope);
    case Expr::Kind::kFilter: {
      FLOTILLA_ASSIGN_OR_RETURN(Value input, Eval(*e.children[0], scope));
      FLOTILLA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, scope));
      FLOTILLA_ASSIGN_OR_RETURN(Value result, CallFilter(e.name, input, args));
      return Charged(std::move(result));
    }
    case Expr::Kind::kTest: {
      FLOTILLA_ASSIGN_OR_RETURN(Value subject, Eval(*e.children[0], scope));
      FLOTILLA_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, scope));
      FLOTILLA_ASSIGN_OR_RETURN(bool pass, CallTest(e.name, subject, args));
      return Value::Bool(pass != e.negated);
    }
    case Expr::Kind::kUnary: {
      FLOTILLA_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0], scope));
      if (e.name == "not") return Value::Bool(!v.Truthy());
      if (v.is_undefined()) return UndefinedError(v);
      if (!Numeric(v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "bad operand type for unary ", e.name, ": '", v.TypeName(), "'"));
      }
      if (e.name == "+") return v.is_float() ? v : Value::Int(v.as_int());
      if (v.is_float()) return Value::Float(-v.as_number());
      if (v.as_int() == INT64_MIN) return Overflow("-");
      return Value::Int(-v.as_int());
    }
    case Expr::Kind::kBinary:
      return EvalBinary(e, scope);
    case Expr::Kind::kCompare:
      return EvalCompare(e, scope);
    case Expr::Kind::kCond: {
      FLOTILLA_ASSIGN_OR_RETURN(Value c, Eval(*e.children[1], scope));
      if (c.Truthy()) return Eval(*e.children[0], scope);
      if (e.children[2] == nullptr) return Value::Undefined("");
      return Eval(*e.children[2], scope);
    }
  }
  return absl::InternalError("unknown expression kind");
}

}  // namespace flotilla::jinja::internal
