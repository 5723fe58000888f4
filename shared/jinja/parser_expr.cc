// Expressions, one function per precedence level as in Jinja's parser.
#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/jinja/parser_internal.h"

namespace flotilla::jinja::internal {

using Kind = Token::Kind;

namespace {

ExprPtr Binary(const std::string& op, ExprPtr left, ExprPtr right) {
  auto e = std::make_unique<Expr>();
  e->kind = Expr::Kind::kBinary;
  e->line = left->line;
  e->name = op;
  e->children.push_back(std::move(left));
  e->children.push_back(std::move(right));
  return e;
}

// Leaves one level of recursive parsing.
struct Leave {
  int* depth;
  ~Leave() { --*depth; }
};

}  // namespace

absl::Status Parser::Seal(Expr* e) const {
  int below = 0;
  for (const ExprPtr& c : e->children) {
    if (c != nullptr) below = std::max(below, c->height);
  }
  for (const auto& [k, c] : e->kwargs) below = std::max(below, c->height);
  e->height = below + 1;
  if (e->height > kMaxHeight) {
    return Error(absl::StrCat("expression deeper than ", kMaxHeight,
                              " levels (a chain of operators, filters, "
                              "calls or subscripts counts each link)"));
  }
  return absl::OkStatus();
}

absl::Status Parser::Enter(absl::string_view what) {
  if (++depth_ > kMaxNesting) {
    return Error(
        absl::StrCat(what, " nest deeper than ", kMaxNesting, " levels"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> Parser::ParseTupleOrExpression(bool with_condexpr) {
  FLOTILLA_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression(with_condexpr));
  if (!IsOp(",")) return first;
  ExprPtr tuple = MakeExpr(Expr::Kind::kTuple);
  tuple->children.push_back(std::move(first));
  while (AcceptOp(",")) {
    const Token& t = Peek();
    if (t.kind == Kind::kVarEnd || t.kind == Kind::kBlockEnd ||
        (t.kind == Kind::kOp && (t.text == ")" || t.text == "]")) ||
        (t.kind == Kind::kName && t.text == "if")) {
      break;
    }
    FLOTILLA_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(with_condexpr));
    tuple->children.push_back(std::move(item));
  }
  FLOTILLA_RETURN_IF_ERROR(Seal(tuple.get()));
  return tuple;
}

absl::StatusOr<ExprPtr> Parser::ParseExpression(bool with_condexpr) {
  // `a if b else c if d else ...` recurses here once per `else`.
  Leave leave{&depth_};
  FLOTILLA_RETURN_IF_ERROR(Enter("expressions"));
  FLOTILLA_ASSIGN_OR_RETURN(ExprPtr node, ParseOr());
  if (!with_condexpr) return node;
  while (IsName("if")) {
    Next();
    ExprPtr cond = MakeExpr(Expr::Kind::kCond);
    FLOTILLA_ASSIGN_OR_RETURN(ExprPtr test, ParseOr());
    ExprPtr otherwise;
    if (AcceptName("else")) {
      FLOTILLA_ASSIGN_OR_RETURN(otherwise, ParseExpression());
    }
    cond->children.push_back(std::move(node));
    cond->children.push_back(std::move(test));
    cond->children.push_back(std::move(otherwise));
    FLOTILLA_RETURN_IF_ERROR(Seal(cond.get()));
    node = std::move(cond);
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseLeftAssociative(
    std::initializer_list<absl::string_view> ops, Level next) {
  FLOTILLA_ASSIGN_OR_RETURN(ExprPtr left, (this->*next)());
  while (true) {
    absl::string_view op;
    for (absl::string_view o : ops) {
      if (IsOp(o) || IsName(o)) op = o;  // "or"/"and" are names, the rest ops
    }
    if (op.empty()) return left;
    Next();
    FLOTILLA_ASSIGN_OR_RETURN(ExprPtr right, (this->*next)());
    left = Binary(std::string(op), std::move(left), std::move(right));
    FLOTILLA_RETURN_IF_ERROR(Seal(left.get()));
  }
}

absl::StatusOr<ExprPtr> Parser::ParseOr() {
  return ParseLeftAssociative({"or"}, &Parser::ParseAnd);
}

absl::StatusOr<ExprPtr> Parser::ParseAnd() {
  return ParseLeftAssociative({"and"}, &Parser::ParseNot);
}

absl::StatusOr<ExprPtr> Parser::ParseNot() {
  if (IsName("not")) {
    Leave leave{&depth_};
    FLOTILLA_RETURN_IF_ERROR(Enter("'not' operators"));
    ExprPtr node = MakeExpr(Expr::Kind::kUnary);
    Next();
    node->name = "not";
    FLOTILLA_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
    node->children.push_back(std::move(operand));
    FLOTILLA_RETURN_IF_ERROR(Seal(node.get()));
    return node;
  }
  return ParseCompare();
}

absl::StatusOr<ExprPtr> Parser::ParseCompare() {
  FLOTILLA_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
  ExprPtr cmp;
  while (true) {
    std::string op;
    const Token& t = Peek();
    if (t.kind == Kind::kOp && (t.text == "==" || t.text == "!=" ||
                                t.text == "<" || t.text == "<=" ||
                                t.text == ">" || t.text == ">=")) {
      op = t.text;
      Next();
    } else if (IsName("in")) {
      op = "in";
      Next();
    } else if (IsName("not") && IsName("in", 1)) {
      op = "not in";
      Next();
      Next();
    } else {
      break;
    }
    if (cmp == nullptr) {
      cmp = MakeExpr(Expr::Kind::kCompare);
      cmp->children.push_back(std::move(first));
    }
    FLOTILLA_ASSIGN_OR_RETURN(ExprPtr right, ParseMath1());
    cmp->ops.push_back(op);
    cmp->children.push_back(std::move(right));
  }
  // Once, after the chain: a chain is one flat node (sealing it per link
  // was quadratic in its length; chat_template_fuzz found a 34,595-link one).
  if (cmp != nullptr) FLOTILLA_RETURN_IF_ERROR(Seal(cmp.get()));
  return cmp != nullptr ? std::move(cmp) : std::move(first);
}

absl::StatusOr<ExprPtr> Parser::ParseMath1() {
  return ParseLeftAssociative({"+", "-"}, &Parser::ParseConcat);
}

absl::StatusOr<ExprPtr> Parser::ParseConcat() {
  return ParseLeftAssociative({"~"}, &Parser::ParseMath2);
}

absl::StatusOr<ExprPtr> Parser::ParseMath2() {
  return ParseLeftAssociative({"*", "/", "//", "%"}, &Parser::ParsePow);
}

absl::StatusOr<ExprPtr> Parser::ParsePow() {
  return ParseLeftAssociative({"**"}, &Parser::ParseFiltered);
}

absl::StatusOr<ExprPtr> Parser::ParseFiltered() { return ParseUnary(true); }

absl::StatusOr<ExprPtr> Parser::ParseUnary(bool with_filter) {
  // Nesting is bounded so that a hostile template cannot exhaust the stack.
  Leave leave{&depth_};
  FLOTILLA_RETURN_IF_ERROR(Enter("expressions"));
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    node = MakeExpr(Expr::Kind::kUnary);
    node->name = Next().text;
    FLOTILLA_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
    node->children.push_back(std::move(operand));
    FLOTILLA_RETURN_IF_ERROR(Seal(node.get()));
  } else {
    FLOTILLA_ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  FLOTILLA_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) return ParseFilterExpr(std::move(node));
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParsePrimary() {
  const Token& t = Peek();
  ExprPtr node = MakeExpr(Expr::Kind::kLiteral);
  switch (t.kind) {
    case Kind::kName:
      Next();
      if (t.text == "true" || t.text == "True") {
        node->literal = Value::Bool(true);
      } else if (t.text == "false" || t.text == "False") {
        node->literal = Value::Bool(false);
      } else if (t.text == "none" || t.text == "None") {
        node->literal = Value::None();
      } else {
        node->kind = Expr::Kind::kName;
        node->name = t.text;
      }
      return node;
    case Kind::kString: {
      std::string s;
      while (Peek().kind == Kind::kString) s += Next().text;
      node->literal = Value::String(std::move(s));
      return node;
    }
    case Kind::kInt: {
      int64_t v = 0;
      if (!absl::SimpleAtoi(t.text, &v)) return Error("integer literal too large");
      Next();
      node->literal = Value::Int(v);
      return node;
    }
    case Kind::kFloat:
      node->literal = Value::Float(std::strtod(Next().text.c_str(), nullptr));
      return node;
    default:
      break;
  }
  if (AcceptOp("(")) {
    if (AcceptOp(")")) {
      node->kind = Expr::Kind::kTuple;
      return node;
    }
    FLOTILLA_ASSIGN_OR_RETURN(ExprPtr inner, ParseTupleOrExpression());
    FLOTILLA_RETURN_IF_ERROR(ExpectOp(")"));
    return inner;
  }
  if (AcceptOp("[")) {
    node->kind = Expr::Kind::kList;
    while (!AcceptOp("]")) {
      if (!node->children.empty()) FLOTILLA_RETURN_IF_ERROR(ExpectOp(","));
      if (AcceptOp("]")) break;
      FLOTILLA_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
      node->children.push_back(std::move(item));
    }
    FLOTILLA_RETURN_IF_ERROR(Seal(node.get()));
    return node;
  }
  if (AcceptOp("{")) {
    node->kind = Expr::Kind::kDict;
    while (!AcceptOp("}")) {
      if (!node->children.empty()) FLOTILLA_RETURN_IF_ERROR(ExpectOp(","));
      if (AcceptOp("}")) break;
      FLOTILLA_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
      FLOTILLA_RETURN_IF_ERROR(ExpectOp(":"));
      FLOTILLA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      node->children.push_back(std::move(key));
      node->children.push_back(std::move(value));
    }
    FLOTILLA_RETURN_IF_ERROR(Seal(node.get()));
    return node;
  }
  return Error("expected an expression");
}

absl::StatusOr<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".")) {
      Next();
      const Token& t = Peek();
      if (t.kind == Kind::kInt) {
        ExprPtr item = MakeExpr(Expr::Kind::kItem);
        ExprPtr index = MakeExpr(Expr::Kind::kLiteral);
        int64_t v = 0;
        if (!absl::SimpleAtoi(t.text, &v)) return Error("index too large");
        Next();
        index->literal = Value::Int(v);
        item->children.push_back(std::move(node));
        item->children.push_back(std::move(index));
        FLOTILLA_RETURN_IF_ERROR(Seal(item.get()));
        node = std::move(item);
        continue;
      }
      ExprPtr attr = MakeExpr(Expr::Kind::kAttr);
      FLOTILLA_ASSIGN_OR_RETURN(attr->name, ExpectName());
      attr->children.push_back(std::move(node));
      FLOTILLA_RETURN_IF_ERROR(Seal(attr.get()));
      node = std::move(attr);
    } else if (IsOp("[")) {
      Next();
      FLOTILLA_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (IsOp("(")) {
      Next();
      FLOTILLA_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::ParseSubscript(ExprPtr node) {
  ExprPtr parts[3];
  int colons = 0;
  if (!IsOp(":")) {
    FLOTILLA_ASSIGN_OR_RETURN(parts[0], ParseExpression());
  }
  while (colons < 2 && AcceptOp(":")) {
    ++colons;
    if (!IsOp(":") && !IsOp("]")) {
      FLOTILLA_ASSIGN_OR_RETURN(parts[colons], ParseExpression());
    }
  }
  FLOTILLA_RETURN_IF_ERROR(ExpectOp("]"));
  ExprPtr out = MakeExpr(colons == 0 ? Expr::Kind::kItem : Expr::Kind::kSlice);
  out->children.push_back(std::move(node));
  out->children.push_back(std::move(parts[0]));
  if (colons > 0) {
    out->children.push_back(std::move(parts[1]));
    out->children.push_back(std::move(parts[2]));
  }
  FLOTILLA_RETURN_IF_ERROR(Seal(out.get()));
  return out;
}

absl::StatusOr<ExprPtr> Parser::ParseCall(ExprPtr callee) {
  ExprPtr call = MakeExpr(Expr::Kind::kCall);
  call->children.push_back(std::move(callee));
  FLOTILLA_RETURN_IF_ERROR(ParseCallArgs(call.get()));
  FLOTILLA_RETURN_IF_ERROR(Seal(call.get()));
  return call;
}

absl::StatusOr<std::string> Parser::ParseDottedName() {
  FLOTILLA_ASSIGN_OR_RETURN(std::string name, ExpectName());
  while (AcceptOp(".")) {
    FLOTILLA_ASSIGN_OR_RETURN(std::string part, ExpectName());
    absl::StrAppend(&name, ".", part);
  }
  return name;
}

absl::Status Parser::ParseCallArgs(Expr* call) {
  bool first = true;
  while (!AcceptOp(")")) {
    if (!first) FLOTILLA_RETURN_IF_ERROR(ExpectOp(","));
    first = false;
    if (AcceptOp(")")) break;
    if (IsOp("*") || IsOp("**")) {
      return Error("*args and **kwargs in calls are not supported");
    }
    if (Peek().kind == Kind::kName && IsOp("=", 1)) {
      std::string key = Next().text;
      Next();
      FLOTILLA_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
      call->kwargs.emplace_back(std::move(key), std::move(value));
      continue;
    }
    if (!call->kwargs.empty()) {
      return Error("a positional argument follows a keyword argument");
    }
    FLOTILLA_ASSIGN_OR_RETURN(ExprPtr arg, ParseExpression());
    call->children.push_back(std::move(arg));
  }
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (AcceptOp("|")) {
      FLOTILLA_ASSIGN_OR_RETURN(node, ParseFilter(std::move(node)));
    } else if (AcceptName("is")) {
      FLOTILLA_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (IsOp("(")) {
      Next();
      FLOTILLA_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::ParseFilter(ExprPtr input) {
  ExprPtr filter = MakeExpr(Expr::Kind::kFilter);
  FLOTILLA_ASSIGN_OR_RETURN(filter->name, ParseDottedName());
  filter->children.push_back(std::move(input));
  if (AcceptOp("(")) FLOTILLA_RETURN_IF_ERROR(ParseCallArgs(filter.get()));
  FLOTILLA_RETURN_IF_ERROR(Seal(filter.get()));
  return filter;
}

absl::StatusOr<ExprPtr> Parser::ParseTest(ExprPtr subject) {
  ExprPtr test = MakeExpr(Expr::Kind::kTest);
  test->negated = AcceptName("not");
  FLOTILLA_ASSIGN_OR_RETURN(test->name, ParseDottedName());
  test->children.push_back(std::move(subject));
  const Token& t = Peek();
  if (AcceptOp("(")) {
    FLOTILLA_RETURN_IF_ERROR(ParseCallArgs(test.get()));
  } else if ((t.kind == Kind::kName || t.kind == Kind::kString ||
              t.kind == Kind::kInt || t.kind == Kind::kFloat ||
              IsOp("[") || IsOp("{")) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) return Error("tests cannot be chained with 'is'");
    FLOTILLA_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    FLOTILLA_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    test->children.push_back(std::move(arg));
  }
  FLOTILLA_RETURN_IF_ERROR(Seal(test.get()));
  return test;
}

}  // namespace flotilla::jinja::internal
