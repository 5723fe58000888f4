// Parsers for the on-disk tokenizer files: tiktoken.model (BPE ranks) and
// the added_tokens_decoder section of tokenizer_config.json. Every error
// names its source (file path) and, for tiktoken.model, the line.
#ifndef FLOTILLA_SHARED_TOKENIZER_TIKTOKEN_FILE_H_
#define FLOTILLA_SHARED_TOKENIZER_TIKTOKEN_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace flotilla::tokenizer {

// Largest accepted rank or added-token id. Keeps id-indexed tables dense
// and small; real vocabularies (Kimi: 163,840) are far below it.
inline constexpr int32_t kMaxTokenId = (1 << 24) - 1;

// One BPE token: its raw bytes and rank (which is also its id).
struct RankEntry {
  std::string bytes;
  int32_t rank = 0;
};

// A literal string matched before BPE, with a fixed id.
struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
};

// Reads a whole file. NotFound when it does not exist; other failures carry
// the errno text. Messages name `path`.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Decodes standard padded base64 strictly (no whitespace, canonical padding
// bits), so that each token has exactly one textual form and duplicate
// detection on bytes cannot be fooled.
absl::StatusOr<std::string> StrictBase64Decode(absl::string_view in);

// Parses `base64(bytes) rank` lines. Blank lines are skipped, as tiktoken
// does; a trailing CR is tolerated. Rejects bad base64, empty tokens,
// non-numeric or out-of-range ranks, and duplicate ranks or bytes, with
// "<source>:<line>: ..." messages.
absl::StatusOr<std::vector<RankEntry>> ParseTiktokenModel(
    absl::string_view contents, absl::string_view source);

// Parses tokenizer_config.json and returns its added_tokens_decoder entries
// sorted by id. Requires the key to be present: a config without it would
// silently drop [BOS] and the chat markers.
absl::StatusOr<std::vector<AddedToken>> ParseAddedTokens(
    absl::string_view json_text, absl::string_view source);

}  // namespace flotilla::tokenizer

#endif  // FLOTILLA_SHARED_TOKENIZER_TIKTOKEN_FILE_H_
