// Finds added tokens (e.g. [BOS], <|open|>) in text: leftmost occurrence,
// longest at that position.
#ifndef FLOTILLA_SHARED_TOKENIZER_ADDED_TOKENS_H_
#define FLOTILLA_SHARED_TOKENIZER_ADDED_TOKENS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace flotilla::tokenizer {

class AddedTokenMatcher {
 public:
  struct Match {
    size_t pos = 0;
    size_t length = 0;
    int32_t id = 0;
  };

  // Fails on empty content or content already added.
  absl::Status Add(std::string content, int32_t id);

  // First match at or after `from`. Candidates are bucketed by first byte
  // and sorted longest first, so the first hit at a position is the
  // longest; find_first_of skips text that cannot start any token.
  std::optional<Match> FindFirst(absl::string_view text, size_t from) const;

  // Id of `content`, or -1.
  int32_t IdOf(absl::string_view content) const;

  // Content of `id`, or nullptr.
  const std::string* ContentOf(int32_t id) const;

  bool empty() const { return by_content_.empty(); }

 private:
  absl::flat_hash_map<std::string, int32_t> by_content_;
  absl::flat_hash_map<int32_t, std::string> by_id_;
  std::string first_bytes_;  // Distinct first bytes of all tokens.
  // Per first byte: (content, id), longest content first.
  std::array<std::vector<std::pair<std::string, int32_t>>, 256> buckets_;
};

}  // namespace flotilla::tokenizer

#endif  // FLOTILLA_SHARED_TOKENIZER_ADDED_TOKENS_H_
