#include "shared/jinja/lexer.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "shared/jinja/builtins.h"

namespace flotilla::jinja {
namespace {

using internal::AppendUtf8;

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

// The body of a string literal with Python's escapes decoded, as Jinja
// decodes it ("unicode-escape"); unknown escapes stay as written.
std::string DecodeString(absl::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char e = body[++i];
    auto hex = [&](int digits) -> bool {
      uint32_t cp = 0;
      for (int k = 1; k <= digits; ++k) {
        if (i + k >= body.size() || !std::isxdigit(body[i + k])) return false;
        const char h = body[i + k];
        cp = cp * 16 + (std::isdigit(h) ? h - '0' : std::tolower(h) - 'a' + 10);
      }
      AppendUtf8(&out, cp);
      i += digits;
      return true;
    };
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case 'a': out += '\a'; break;
      case '0': out += '\0'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case '\n': break;
      case 'x':
        if (!hex(2)) absl::StrAppend(&out, "\\x");
        break;
      case 'u':
        if (!hex(4)) absl::StrAppend(&out, "\\u");
        break;
      case 'U':
        if (!hex(8)) absl::StrAppend(&out, "\\U");
        break;
      default:
        out += '\\';
        out += e;
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  absl::StatusOr<std::vector<Token>> Run() {
    bool line_starting = true;
    size_t pos = 0;
    while (pos < src_.size()) {
      const size_t start = NextTagStart(pos);
      std::string text = src_.substr(pos, start - pos);
      if (start == src_.size()) {
        Emit(Token::Kind::kText, text);
        break;
      }
      const char type = src_[start + 1];  // '{', '%' or '#'
      const char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (sign == '-') {
        size_t keep = text.size();
        while (keep > 0 && IsSpace(text[keep - 1])) --keep;
        text.resize(keep);
      } else if (sign != '+' && type != '{') {
        const size_t l_pos = text.rfind('\n') == std::string::npos
                                 ? 0
                                 : text.rfind('\n') + 1;
        if (l_pos > 0 || line_starting) {
          bool blank = true;
          for (size_t i = l_pos; i < text.size(); ++i) blank &= IsSpace(text[i]);
          if (blank) text.resize(l_pos);
        }
      }
      Emit(Token::Kind::kText, text);
      pos = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      absl::StatusOr<size_t> end = type == '#'   ? SkipComment(pos)
                                   : type == '{' ? LexTag(pos, '}', true)
                                                 : LexTag(pos, '%', false);
      if (!end.ok()) return end.status();
      pos = *end;
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    tokens_.push_back({Token::Kind::kEof, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t NextTagStart(size_t pos) const {
    for (size_t i = pos; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' &&
          (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return src_.size();
  }

  void Emit(Token::Kind kind, std::string text) {
    if (kind == Token::Kind::kText && text.empty()) return;
    const int line = line_;
    for (char c : text) line_ += c == '\n';
    tokens_.push_back({kind, std::move(text), line});
  }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("template line ", line_, ": ", what));
  }

  // After a closing tag at `pos` (just past it): `-` strips the whitespace
  // that follows, else trim_blocks drops one newline after block tags.
  size_t AfterTag(size_t pos, bool stripped, bool block) {
    if (stripped) {
      while (pos < src_.size() && IsSpace(src_[pos])) {
        line_ += src_[pos] == '\n';
        ++pos;
      }
    } else if (block && pos < src_.size() && src_[pos] == '\n') {
      ++line_;
      ++pos;
    }
    return pos;
  }

  absl::StatusOr<size_t> SkipComment(size_t pos) {
    const size_t end = src_.find("#}", pos);
    if (end == std::string::npos) return Error("unterminated comment");
    for (size_t i = pos; i < end; ++i) line_ += src_[i] == '\n';
    const bool stripped = end > pos && src_[end - 1] == '-';
    return AfterTag(end + 2, stripped, true);
  }

  absl::StatusOr<size_t> LexTag(size_t pos, char closer, bool variable) {
    Emit(variable ? Token::Kind::kVarBegin : Token::Kind::kBlockBegin, "");
    int depth = 0;
    while (true) {
      while (pos < src_.size() && IsSpace(src_[pos])) {
        line_ += src_[pos] == '\n';
        ++pos;
      }
      if (pos >= src_.size()) return Error("unterminated tag");
      const char c = src_[pos];
      const bool strip = c == '-' && pos + 2 < src_.size() &&
                         src_[pos + 1] == closer && src_[pos + 2] == '}';
      if (depth == 0 && (strip || (c == closer && pos + 1 < src_.size() &&
                                   src_[pos + 1] == '}'))) {
        tokens_.push_back({variable ? Token::Kind::kVarEnd
                                    : Token::Kind::kBlockEnd,
                           "", line_});
        const size_t after = pos + (strip ? 3 : 2);
        absl::StatusOr<size_t> next = AfterTag(after, strip, !variable);
        if (!next.ok()) return next;
        if (!variable && IsRawBlock()) return LexRaw(*next);
        return next;
      }
      absl::StatusOr<size_t> next = LexOne(pos, &depth);
      if (!next.ok()) return next;
      pos = *next;
    }
  }

  // {% raw %}: everything up to {% endraw %} is text.
  bool IsRawBlock() const {
    const size_t n = tokens_.size();
    return n >= 3 && tokens_[n - 3].kind == Token::Kind::kBlockBegin &&
           tokens_[n - 2].kind == Token::Kind::kName &&
           tokens_[n - 2].text == "raw";
  }

  absl::StatusOr<size_t> LexRaw(size_t pos) {
    tokens_.resize(tokens_.size() - 3);
    for (size_t i = pos; i < src_.size(); ++i) {
      if (src_.compare(i, 2, "{%") != 0) continue;
      size_t j = i + 2;
      const bool strip_before = j < src_.size() && src_[j] == '-';
      if (strip_before || (j < src_.size() && src_[j] == '+')) ++j;
      while (j < src_.size() && IsSpace(src_[j])) ++j;
      if (src_.compare(j, 6, "endraw") != 0) continue;
      j += 6;
      while (j < src_.size() && IsSpace(src_[j])) ++j;
      const bool strip_after = j < src_.size() && src_[j] == '-';
      if (strip_after) ++j;
      if (src_.compare(j, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos, i - pos);
      if (strip_before) {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      }
      Emit(Token::Kind::kText, text);
      return AfterTag(j + 2, strip_after, true);
    }
    return Error("unterminated raw block");
  }

  absl::StatusOr<size_t> LexOne(size_t pos, int* depth) {
    const char c = src_[pos];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos;
      while (end < src_.size() &&
             (std::isalnum(static_cast<unsigned char>(src_[end])) ||
              src_[end] == '_')) {
        ++end;
      }
      tokens_.push_back({Token::Kind::kName, src_.substr(pos, end - pos), line_});
      return end;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t end = pos;
      bool is_float = false;
      while (end < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[end])) ||
              src_[end] == '_')) {
        ++end;
      }
      const bool after_dot = !tokens_.empty() &&
                             tokens_.back().kind == Token::Kind::kOp &&
                             tokens_.back().text == ".";
      if (!after_dot && end + 1 < src_.size() && src_[end] == '.' &&
          std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
        is_float = true;
        ++end;
        while (end < src_.size() &&
               std::isdigit(static_cast<unsigned char>(src_[end]))) {
          ++end;
        }
      }
      if (!after_dot && end < src_.size() &&
          (src_[end] == 'e' || src_[end] == 'E')) {
        size_t e = end + 1;
        if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
        if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
          is_float = true;
          end = e;
          while (end < src_.size() &&
                 std::isdigit(static_cast<unsigned char>(src_[end]))) {
            ++end;
          }
        }
      }
      std::string text = src_.substr(pos, end - pos);
      text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
      tokens_.push_back(
          {is_float ? Token::Kind::kFloat : Token::Kind::kInt, text, line_});
      return end;
    }
    if (c == '\'' || c == '"') {
      size_t end = pos + 1;
      while (end < src_.size() && src_[end] != c) {
        if (src_[end] == '\\') ++end;
        ++end;
      }
      if (end >= src_.size()) return Error("unterminated string");
      std::string body = src_.substr(pos + 1, end - pos - 1);
      tokens_.push_back({Token::Kind::kString, DecodeString(body), line_});
      for (char ch : body) line_ += ch == '\n';
      return end + 1;
    }
    static const char* const kTwoChar[] = {"==", "!=", "<=", ">=", "//", "**"};
    for (const char* op : kTwoChar) {
      if (src_.compare(pos, 2, op) == 0) {
        tokens_.push_back({Token::Kind::kOp, op, line_});
        return pos + 2;
      }
    }
    if (std::string("<>+-*/%~|.,:()[]{}=").find(c) != std::string::npos) {
      if (c == '(' || c == '[' || c == '{') ++*depth;
      if (c == ')' || c == ']' || c == '}') --*depth;
      tokens_.push_back({Token::Kind::kOp, std::string(1, c), line_});
      return pos + 1;
    }
    return Error(absl::StrCat("unexpected character '", std::string(1, c), "'"));
  }

  std::string src_;
  std::vector<Token> tokens_;
  int line_ = 1;
};

// Jinja reads the source by lines: \r\n and \r become \n, and one trailing
// newline goes.
std::string NormalizeNewlines(absl::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Token>> Lex(absl::string_view source) {
  return Lexer(NormalizeNewlines(source)).Run();
}

}  // namespace flotilla::jinja
