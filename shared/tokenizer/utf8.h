// UTF-8 stepping shared by the pre-tokenizer, the BPE models and streaming
// decode. Everything here is total on arbitrary bytes: tokenizers encode
// invalid UTF-8 byte-wise instead of rejecting it.
#ifndef FLOTILLA_SHARED_TOKENIZER_UTF8_H_
#define FLOTILLA_SHARED_TOKENIZER_UTF8_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace flotilla::tokenizer {

// Length of the UTF-8 sequence starting at text[pos], or 1 for a byte that
// does not start a valid one (overlong forms, surrogates and code points
// past U+10FFFF included); such a byte is then a unit of its own.
size_t Utf8UnitLength(absl::string_view text, size_t pos);

// Bytes at the end of `text` that start a UTF-8 character which is not yet
// complete (0 when it ends on a character boundary or on invalid bytes).
size_t IncompleteUtf8Tail(const std::string& text);

// Whether every byte of `text` belongs to a valid UTF-8 character.
bool IsValidUtf8(absl::string_view text);
// `text` with each byte that starts no valid character replaced by U+FFFD
// (what JSON writers and strict proto3 clients accept).
std::string ToValidUtf8(absl::string_view text);

}  // namespace flotilla::tokenizer

#endif  // FLOTILLA_SHARED_TOKENIZER_UTF8_H_
