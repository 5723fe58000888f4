// GPT-2's byte-level alphabet (bytes_to_unicode): every byte is shown as one
// printable code point so that byte-level vocabularies can be stored as
// text. Printable Latin-1 bytes map to themselves; the other 68 bytes map
// to U+0100.. in byte order. The tokenizer keeps such vocabularies as raw
// bytes internally, so the alphabet is needed only when reading the file.
#ifndef FLOTILLA_SHARED_TOKENIZER_BYTE_LEVEL_H_
#define FLOTILLA_SHARED_TOKENIZER_BYTE_LEVEL_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace flotilla::tokenizer {

// Code point that shows `byte`.
char32_t ByteLevelCodePoint(unsigned char byte);

// The raw bytes a byte-level token shows, or nullopt when `shown` is not
// UTF-8 made only of the alphabet's code points.
std::optional<std::string> ByteLevelToBytes(absl::string_view shown);

}  // namespace flotilla::tokenizer

#endif  // FLOTILLA_SHARED_TOKENIZER_BYTE_LEVEL_H_
