// Splits a Jinja template into text and the tokens inside its tags, with
// the whitespace rules transformers renders chat templates under:
// trim_blocks (the newline after a block or comment tag goes),
// lstrip_blocks (spaces before a block tag on its own line go), `-` in a
// tag strips all whitespace on that side, `+` keeps it, and one trailing
// newline of the template is dropped (keep_trailing_newline off).
#ifndef FLOTILLA_SHARED_JINJA_LEXER_H_
#define FLOTILLA_SHARED_JINJA_LEXER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flotilla::jinja {

struct Token {
  enum class Kind {
    kText,
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,
    kString,  // text holds the decoded string
    kInt,
    kFloat,
    kOp,  // operators and punctuation: == != <= >= // ** < > + - * / % ~
          // | . , : ( ) [ ] { } =
    kEof,
  };
  Kind kind;
  std::string text;
  int line;
};

// InvalidArgument naming the line for an unterminated tag, comment or
// string, or a character that starts no token.
absl::StatusOr<std::vector<Token>> Lex(absl::string_view source);

}  // namespace flotilla::jinja

#endif  // FLOTILLA_SHARED_JINJA_LEXER_H_
