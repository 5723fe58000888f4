#include "shared/tokenizer/added_tokens.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace flotilla::tokenizer {

absl::Status AddedTokenMatcher::Add(std::string content, int32_t id) {
  if (content.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("added token ", id, " has empty content"));
  }
  if (by_id_.contains(id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("added token id ", id, " appears twice"));
  }
  if (!by_content_.emplace(content, id).second) {
    return absl::InvalidArgumentError(
        absl::StrCat("added token '", content, "' appears twice"));
  }
  by_id_.emplace(id, content);
  const auto first = static_cast<unsigned char>(content[0]);
  auto& bucket = buckets_[first];
  if (bucket.empty()) first_bytes_.push_back(content[0]);
  bucket.emplace_back(std::move(content), id);
  std::stable_sort(bucket.begin(), bucket.end(),
                   [](const auto& a, const auto& b) {
                     return a.first.size() > b.first.size();
                   });
  return absl::OkStatus();
}

std::optional<AddedTokenMatcher::Match> AddedTokenMatcher::FindFirst(
    absl::string_view text, size_t from) const {
  if (first_bytes_.empty()) return std::nullopt;
  for (size_t pos = text.find_first_of(first_bytes_, from);
       pos != absl::string_view::npos;
       pos = text.find_first_of(first_bytes_, pos + 1)) {
    const absl::string_view rest = text.substr(pos);
    for (const auto& [content, id] :
         buckets_[static_cast<unsigned char>(text[pos])]) {
      if (absl::StartsWith(rest, content)) {
        return Match{pos, content.size(), id};
      }
    }
  }
  return std::nullopt;
}

int32_t AddedTokenMatcher::IdOf(absl::string_view content) const {
  const auto it = by_content_.find(content);
  return it == by_content_.end() ? -1 : it->second;
}

const std::string* AddedTokenMatcher::ContentOf(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

}  // namespace flotilla::tokenizer
