#include "coordinator/speculate.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace flotilla::coordinator {

std::vector<int32_t> NgramDrafter::Draft(const std::vector<int32_t>& history,
                                         int max_tokens) {
  const size_t n = history.size();
  for (int len = max_ngram_; len >= min_ngram_; --len) {
    const size_t k = static_cast<size_t>(len);
    if (n <= k) continue;
    const int32_t* suffix = history.data() + n - k;
    // The latest earlier occurrence: it is the likeliest to continue alike.
    for (size_t start = n - k; start-- > 0;) {
      if (!std::equal(suffix, suffix + k, history.data() + start)) continue;
      const size_t from = start + k;
      const size_t count = std::min<size_t>(max_tokens, n - from);
      if (count == 0) continue;
      return std::vector<int32_t>(history.begin() + from,
                                  history.begin() + from + count);
    }
  }
  return {};
}

absl::StatusOr<std::unique_ptr<Drafter>> MakeDrafter(const std::string& name) {
  if (name == "ngram") return std::unique_ptr<Drafter>(new NgramDrafter());
  return absl::InvalidArgumentError(
      absl::StrCat("--speculate: unknown drafter '", name, "' (known: ngram)"));
}

}  // namespace flotilla::coordinator
