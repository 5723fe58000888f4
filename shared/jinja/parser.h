// Builds the tree of a lexed template. Statements: if/elif/else, for (with
// tuple targets, a filter condition, else, loop.*), set (names, tuples,
// namespace attributes, blocks), macro, break/continue, filter blocks,
// raw, and transformers' {% generation %}. Expressions follow Jinja's
// precedence: conditional, or, and, not, comparisons (== != < <= > >= in,
// not in), + -, ~, * / // %, **, unary - +, then postfix . [] () | is.
#ifndef FLOTILLA_SHARED_JINJA_PARSER_H_
#define FLOTILLA_SHARED_JINJA_PARSER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "shared/jinja/ast.h"
#include "shared/jinja/lexer.h"

namespace flotilla::jinja {

// InvalidArgument naming the line for a syntax error or an unsupported
// statement (include, extends, import, call blocks: chat templates have
// none, and a template that needs them is refused, not misrendered).
absl::StatusOr<Body> Parse(const std::vector<Token>& tokens);

}  // namespace flotilla::jinja

#endif  // FLOTILLA_SHARED_JINJA_PARSER_H_
