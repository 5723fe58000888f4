#include "shared/tokenizer/utf8.h"

namespace flotilla::tokenizer {

size_t Utf8UnitLength(absl::string_view text, size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  size_t len = lead < 0x80   ? 1
               : lead < 0xC2 ? 0
               : lead < 0xE0 ? 2
               : lead < 0xF0 ? 3
               : lead < 0xF5 ? 4
                             : 0;
  if (len <= 1 || pos + len > text.size()) return 1;
  const auto second = static_cast<unsigned char>(text[pos + 1]);
  // Overlong three/four-byte forms, surrogates and code points past
  // U+10FFFF are not valid UTF-8.
  if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second > 0x9F) ||
      (lead == 0xF0 && second < 0x90) || (lead == 0xF4 && second > 0x8F)) {
    return 1;
  }
  for (size_t k = 1; k < len; ++k) {
    if ((static_cast<unsigned char>(text[pos + k]) & 0xC0) != 0x80) return 1;
  }
  return len;
}

size_t IncompleteUtf8Tail(const std::string& text) {
  // A character is at most 4 bytes: look back at most 3 for its lead byte.
  for (size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const auto c = static_cast<unsigned char>(text[text.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

bool IsValidUtf8(absl::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8UnitLength(text, i);
    if (n == 1 && static_cast<unsigned char>(text[i]) >= 0x80) return false;
    i += n;
  }
  return true;
}

std::string ToValidUtf8(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8UnitLength(text, i);
    if (n == 1 && static_cast<unsigned char>(text[i]) >= 0x80) {
      out += "\xEF\xBF\xBD";  // U+FFFD
    } else {
      out.append(text.data() + i, n);
    }
    i += n;
  }
  return out;
}

}  // namespace flotilla::tokenizer
