#include "shared/jinja/parser.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/jinja/parser_internal.h"

namespace flotilla::jinja {
namespace internal {

using Kind = Token::Kind;

const Token& Parser::Peek(size_t ahead) const {
  return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
}

const Token& Parser::Next() {
  const Token& t = Peek();
  if (pos_ < tokens_.size() - 1) ++pos_;
  return t;
}

bool Parser::IsOp(absl::string_view op, size_t ahead) const {
  return Peek(ahead).kind == Kind::kOp && Peek(ahead).text == op;
}

bool Parser::IsName(absl::string_view name, size_t ahead) const {
  return Peek(ahead).kind == Kind::kName && Peek(ahead).text == name;
}

bool Parser::AcceptOp(absl::string_view op) {
  if (!IsOp(op)) return false;
  Next();
  return true;
}

bool Parser::AcceptName(absl::string_view name) {
  if (!IsName(name)) return false;
  Next();
  return true;
}

absl::Status Parser::Error(absl::string_view what) const {
  const Token& t = Peek();
  std::string near = t.kind == Kind::kEof        ? "end of template"
                     : t.kind == Kind::kBlockEnd ? "'%}'"
                     : t.kind == Kind::kVarEnd   ? "'}}'"
                                                 : "'" + t.text + "'";
  return absl::InvalidArgumentError(
      absl::StrCat("template line ", t.line, ": ", what, " (at ", near, ")"));
}

absl::Status Parser::ExpectOp(absl::string_view op) {
  if (AcceptOp(op)) return absl::OkStatus();
  return Error(absl::StrCat("expected '", op, "'"));
}

absl::Status Parser::ExpectBlockEnd() {
  if (Peek().kind == Kind::kBlockEnd) {
    Next();
    return absl::OkStatus();
  }
  return Error("expected '%}'");
}

absl::StatusOr<std::string> Parser::ExpectName() {
  if (Peek().kind != Kind::kName) return Error("expected a name");
  return Next().text;
}

ExprPtr Parser::MakeExpr(Expr::Kind kind) const {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = Peek().line;
  return e;
}

absl::StatusOr<Body> Parser::ParseBody(const std::vector<std::string>& ends,
                                       std::string* end) {
  Body body;
  while (true) {
    const Token& t = Peek();
    if (t.kind == Kind::kEof) {
      if (!ends.empty()) {
        return Error(absl::StrCat("missing {% ", ends.back(), " %}"));
      }
      end->clear();
      return body;
    }
    if (t.kind == Kind::kText) {
      auto node = std::make_unique<Node>();
      node->kind = Node::Kind::kText;
      node->line = t.line;
      node->text = Next().text;
      body.push_back(std::move(node));
      continue;
    }
    if (t.kind == Kind::kVarBegin) {
      Next();
      auto node = std::make_unique<Node>();
      node->kind = Node::Kind::kOutput;
      node->line = t.line;
      FLOTILLA_ASSIGN_OR_RETURN(node->expr, ParseTupleOrExpression());
      if (Peek().kind != Kind::kVarEnd) return Error("expected '}}'");
      Next();
      body.push_back(std::move(node));
      continue;
    }
    if (t.kind != Kind::kBlockBegin) return Error("unexpected token");
    Next();
    FLOTILLA_ASSIGN_OR_RETURN(std::string keyword, ExpectName());
    if (std::find(ends.begin(), ends.end(), keyword) != ends.end()) {
      *end = keyword;
      return body;
    }
    FLOTILLA_ASSIGN_OR_RETURN(NodePtr node, ParseStatement(keyword));
    body.push_back(std::move(node));
  }
}

absl::StatusOr<NodePtr> Parser::ParseStatement(const std::string& keyword) {
  if (++depth_ > kMaxNesting) return Error("statements nest too deep");
  struct Leave {
    int* depth;
    ~Leave() { --*depth; }
  } leave{&depth_};
  if (keyword == "if") return ParseIf();
  if (keyword == "for") return ParseFor();
  if (keyword == "set") return ParseSet();
  if (keyword == "macro") return ParseMacro();
  if (keyword == "filter") return ParseFilterBlock();
  if (keyword == "break" || keyword == "continue") {
    auto node = std::make_unique<Node>();
    node->kind =
        keyword == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
    node->line = Peek().line;
    FLOTILLA_RETURN_IF_ERROR(ExpectBlockEnd());
    return node;
  }
  if (keyword == "generation") {
    auto node = std::make_unique<Node>();
    node->kind = Node::Kind::kScope;
    FLOTILLA_RETURN_IF_ERROR(ExpectBlockEnd());
    std::string end;
    FLOTILLA_ASSIGN_OR_RETURN(node->body, ParseBody({"endgeneration"}, &end));
    FLOTILLA_RETURN_IF_ERROR(ExpectBlockEnd());
    return node;
  }
  --pos_;
  return Error(absl::StrCat("unsupported or unexpected statement '", keyword,
                            "'"));
}

absl::StatusOr<NodePtr> Parser::ParseIf() {
  auto node = std::make_unique<Node>();
  node->kind = Node::Kind::kIf;
  node->line = Peek().line;
  while (true) {
    FLOTILLA_ASSIGN_OR_RETURN(ExprPtr cond, ParseTupleOrExpression());
    FLOTILLA_RETURN_IF_ERROR(ExpectBlockEnd());
    std::string end;
    FLOTILLA_ASSIGN_OR_RETURN(Body body,
                              ParseBody({"elif", "else", "endif"}, &end));
    node->branches.emplace_back(std::move(cond), std::move(body));
    if (end == "elif") continue;
    FLOTILLA_RETURN_IF_ERROR(ExpectBlockEnd());
    if (end == "else") {
      FLOTILLA_ASSIGN_OR_RETURN(node->else_body, ParseBody({"endif"}, &end));
      FLOTILLA_RETURN_IF_ERROR(ExpectBlockEnd());
    }
    return node;
  }
}

absl::StatusOr<std::vector<std::string>> Parser::ParseTargets() {
  std::vector<std::string> targets;
  const bool paren = AcceptOp("(");
  do {
    FLOTILLA_ASSIGN_OR_RETURN(std::string name, ExpectName());
    targets.push_back(name);
  } while (AcceptOp(","));
  if (paren) FLOTILLA_RETURN_IF_ERROR(ExpectOp(")"));
  return targets;
}

absl::StatusOr<NodePtr> Parser::ParseFor() {
  auto node = std::make_unique<Node>();
  node->kind = Node::Kind::kFor;
  node->line = Peek().line;
  FLOTILLA_ASSIGN_OR_RETURN(node->targets, ParseTargets());
  if (!AcceptName("in")) return Error("expected 'in'");
  // No conditional expression here: "if" starts the loop's filter.
  FLOTILLA_ASSIGN_OR_RETURN(node->expr, ParseTupleOrExpression(false));
  if (AcceptName("if")) {
    FLOTILLA_ASSIGN_OR_RETURN(node->filter, ParseExpression());
  }
  if (IsName("recursive")) return Error("recursive loops are not supported");
  FLOTILLA_RETURN_IF_ERROR(ExpectBlockEnd());
  std::string end;
  FLOTILLA_ASSIGN_OR_RETURN(node->body, ParseBody({"else", "endfor"}, &end));
  FLOTILLA_RETURN_IF_ERROR(ExpectBlockEnd());
  if (end == "else") {
    FLOTILLA_ASSIGN_OR_RETURN(node->else_body, ParseBody({"endfor"}, &end));
    FLOTILLA_RETURN_IF_ERROR(ExpectBlockEnd());
  }
  return node;
}

absl::StatusOr<NodePtr> Parser::ParseSet() {
  auto node = std::make_unique<Node>();
  node->kind = Node::Kind::kSet;
  node->line = Peek().line;
  if (Peek().kind == Kind::kName && IsOp(".", 1)) {
    node->targets.push_back(Next().text);
    Next();
    FLOTILLA_ASSIGN_OR_RETURN(node->attr, ExpectName());
  } else {
    FLOTILLA_ASSIGN_OR_RETURN(node->targets, ParseTargets());
  }
  if (Peek().kind == Kind::kBlockEnd) {
    if (node->targets.size() != 1 || !node->attr.empty()) {
      return Error("a {% set %} block assigns one name");
    }
    Next();
    node->kind = Node::Kind::kSetBlock;
    std::string end;
    FLOTILLA_ASSIGN_OR_RETURN(node->body, ParseBody({"endset"}, &end));
    FLOTILLA_RETURN_IF_ERROR(ExpectBlockEnd());
    return node;
  }
  FLOTILLA_RETURN_IF_ERROR(ExpectOp("="));
  FLOTILLA_ASSIGN_OR_RETURN(node->expr, ParseTupleOrExpression());
  FLOTILLA_RETURN_IF_ERROR(ExpectBlockEnd());
  return node;
}

absl::StatusOr<NodePtr> Parser::ParseMacro() {
  auto node = std::make_unique<Node>();
  node->kind = Node::Kind::kMacro;
  node->line = Peek().line;
  FLOTILLA_ASSIGN_OR_RETURN(node->name, ExpectName());
  FLOTILLA_RETURN_IF_ERROR(ExpectOp("("));
  while (!AcceptOp(")")) {
    if (!node->params.empty()) FLOTILLA_RETURN_IF_ERROR(ExpectOp(","));
    if (AcceptOp(")")) break;
    FLOTILLA_ASSIGN_OR_RETURN(std::string param, ExpectName());
    node->params.push_back(param);
    ExprPtr def;
    if (AcceptOp("=")) {
      FLOTILLA_ASSIGN_OR_RETURN(def, ParseExpression());
    } else if (!node->defaults.empty() && node->defaults.back() != nullptr) {
      return Error("a macro parameter without a default follows one with");
    }
    node->defaults.push_back(std::move(def));
  }
  FLOTILLA_RETURN_IF_ERROR(ExpectBlockEnd());
  std::string end;
  FLOTILLA_ASSIGN_OR_RETURN(node->body, ParseBody({"endmacro"}, &end));
  if (Peek().kind == Kind::kName) Next();  // {% endmacro name %}
  FLOTILLA_RETURN_IF_ERROR(ExpectBlockEnd());
  return node;
}

absl::StatusOr<NodePtr> Parser::ParseFilterBlock() {
  auto node = std::make_unique<Node>();
  node->kind = Node::Kind::kFilterBlock;
  node->line = Peek().line;
  FLOTILLA_ASSIGN_OR_RETURN(node->filter, ParseFilter(nullptr));
  while (IsOp("|")) {
    Next();
    FLOTILLA_ASSIGN_OR_RETURN(node->filter, ParseFilter(std::move(node->filter)));
  }
  FLOTILLA_RETURN_IF_ERROR(ExpectBlockEnd());
  std::string end;
  FLOTILLA_ASSIGN_OR_RETURN(node->body, ParseBody({"endfilter"}, &end));
  FLOTILLA_RETURN_IF_ERROR(ExpectBlockEnd());
  return node;
}

}  // namespace internal

absl::StatusOr<Body> Parse(const std::vector<Token>& tokens) {
  internal::Parser parser(tokens);
  std::string end;
  return parser.ParseBody({}, &end);
}

}  // namespace flotilla::jinja
