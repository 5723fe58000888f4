#include "shared/tokenizer/byte_level.h"

#include <array>

#include "shared/tokenizer/utf8.h"

namespace flotilla::tokenizer {
namespace {

bool ShownAsItself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
         (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<char32_t, 256> code_point{};
  // Inverse over U+0000..U+0143 (the largest code point used); -1 = none.
  std::array<int, 0x144> byte_of{};

  Alphabet() {
    byte_of.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      code_point[b] = ShownAsItself(b) ? static_cast<char32_t>(b) : next++;
      byte_of[code_point[b]] = b;
    }
  }
};

const Alphabet& GetAlphabet() {
  static const Alphabet* const kAlphabet = new Alphabet();
  return *kAlphabet;
}

}  // namespace

char32_t ByteLevelCodePoint(unsigned char byte) {
  return GetAlphabet().code_point[byte];
}

std::optional<std::string> ByteLevelToBytes(absl::string_view shown) {
  const Alphabet& a = GetAlphabet();
  std::string bytes;
  for (size_t pos = 0; pos < shown.size();) {
    const size_t len = Utf8UnitLength(shown, pos);
    const auto lead = static_cast<unsigned char>(shown[pos]);
    char32_t cp;
    if (len == 1) {
      if (lead >= 0x80) return std::nullopt;
      cp = lead;
    } else if (len == 2) {
      cp = ((lead & 0x1F) << 6) |
           (static_cast<unsigned char>(shown[pos + 1]) & 0x3F);
    } else {
      return std::nullopt;  // the alphabet has no code point above U+07FF
    }
    if (cp >= a.byte_of.size() || a.byte_of[cp] < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(a.byte_of[cp]));
    pos += len;
  }
  return bytes;
}

}  // namespace flotilla::tokenizer
