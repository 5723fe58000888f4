// The recursive-descent parser behind Parse(): statements in parser.cc,
// expressions in parser_expr.cc.
#ifndef FLOTILLA_SHARED_JINJA_PARSER_INTERNAL_H_
#define FLOTILLA_SHARED_JINJA_PARSER_INTERNAL_H_

#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shared/jinja/ast.h"
#include "shared/jinja/lexer.h"

namespace flotilla::jinja::internal {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

  // Statements until EOF or a block tag named in `ends`; `*end` receives
  // the name found ("" at EOF). The ending tag's name is consumed, its
  // arguments and %} are not.
  absl::StatusOr<Body> ParseBody(const std::vector<std::string>& ends,
                                 std::string* end);

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr = true);
  // A comma-separated list; a tuple when there is a comma.
  absl::StatusOr<ExprPtr> ParseTupleOrExpression(bool with_condexpr = true);

 private:
  absl::StatusOr<NodePtr> ParseStatement(const std::string& keyword);
  absl::StatusOr<NodePtr> ParseIf();
  absl::StatusOr<NodePtr> ParseFor();
  absl::StatusOr<NodePtr> ParseSet();
  absl::StatusOr<NodePtr> ParseMacro();
  absl::StatusOr<NodePtr> ParseFilterBlock();
  absl::StatusOr<std::vector<std::string>> ParseTargets();

  using Level = absl::StatusOr<ExprPtr> (Parser::*)();
  // A level of left-associative binary operators over the `next` level.
  absl::StatusOr<ExprPtr> ParseLeftAssociative(
      std::initializer_list<absl::string_view> ops, Level next);
  absl::StatusOr<ExprPtr> ParseOr();
  absl::StatusOr<ExprPtr> ParseAnd();
  absl::StatusOr<ExprPtr> ParseNot();
  absl::StatusOr<ExprPtr> ParseCompare();
  absl::StatusOr<ExprPtr> ParseMath1();
  absl::StatusOr<ExprPtr> ParseConcat();
  absl::StatusOr<ExprPtr> ParseMath2();
  absl::StatusOr<ExprPtr> ParsePow();
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);
  absl::StatusOr<ExprPtr> ParseFiltered();  // ParseUnary(true)
  absl::StatusOr<ExprPtr> ParsePrimary();
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node);
  // A call of `callee`, after its '(' (arguments and the ')').
  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee);
  // name(.name)* (filters and tests may be dotted).
  absl::StatusOr<std::string> ParseDottedName();
  // Call arguments after '(' up to and including ')'.
  absl::Status ParseCallArgs(Expr* call);
  absl::StatusOr<ExprPtr> ParseFilter(ExprPtr input);
  absl::StatusOr<ExprPtr> ParseTest(ExprPtr subject);

  const Token& Peek(size_t ahead = 0) const;
  const Token& Next();
  bool IsOp(absl::string_view op, size_t ahead = 0) const;
  bool IsName(absl::string_view name, size_t ahead = 0) const;
  bool AcceptOp(absl::string_view op);
  bool AcceptName(absl::string_view name);
  absl::Status ExpectOp(absl::string_view op);
  absl::Status ExpectBlockEnd();
  absl::StatusOr<std::string> ExpectName();
  absl::Status Error(absl::string_view what) const;
  ExprPtr MakeExpr(Expr::Kind kind) const;

  // Sets e->height from its children's; InvalidArgument past kMaxHeight
  // (an operator chain such as 1 + 1 + ... builds a tree as deep as it is
  // long without nesting anything).
  absl::Status Seal(Expr* e) const;
  // Enters one level of recursive parsing; an error past kMaxNesting.
  absl::Status Enter(absl::string_view what);

  static constexpr int kMaxNesting = 100;
  static constexpr int kMaxHeight = 200;
  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int depth_ = 0;  // expressions and statements open now
};

}  // namespace flotilla::jinja::internal

#endif  // FLOTILLA_SHARED_JINJA_PARSER_INTERNAL_H_
