#include "shared/tokenizer/hf_bpe.h"

#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "shared/tokenizer/utf8.h"

namespace flotilla::tokenizer {

absl::StatusOr<HfBpe> HfBpe::Create(
    std::vector<std::pair<std::string, int32_t>> vocab,
    const std::vector<std::pair<std::string, std::string>>& merges,
    const HfBpeOptions& options) {
  HfBpe bpe;
  bpe.options_ = options;
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab) {
    if (id < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.vocab: token '", token, "' has negative id ", id));
    }
    max_id = std::max(max_id, id);
  }
  bpe.tokens_.assign(static_cast<size_t>(max_id) + 1, std::string());
  for (auto& [token, id] : vocab) {
    if (!bpe.tokens_[id].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.vocab: id ", id, " is given to both '",
                       bpe.tokens_[id], "' and '", token, "'"));
    }
    bpe.tokens_[id] = token;
    if (!bpe.vocab_.emplace(std::move(token), id).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.vocab: token '", bpe.tokens_[id], "' appears twice"));
    }
  }
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& [left, right] = merges[i];
    const int32_t a = bpe.IdOf(left), b = bpe.IdOf(right);
    const int32_t merged = bpe.IdOf(absl::StrCat(left, right));
    const char* missing = a < 0        ? "its left token"
                          : b < 0      ? "its right token"
                          : merged < 0 ? "the merged token"
                                       : nullptr;
    if (missing != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.merges[", i, "] ('", left, "' '", right,
                       "'): ", missing, " is not in model.vocab"));
    }
    // The first (best-ranked) rule for a pair wins, as in the Rust crate.
    bpe.merges_.try_emplace(PairKey(a, b),
                            Merge{static_cast<int32_t>(i), merged});
  }
  for (int byte = 0; byte < 256; ++byte) {
    bpe.byte_ids_[byte] =
        options.byte_units ? bpe.IdOf(std::string(1, static_cast<char>(byte)))
                           : bpe.IdOf(absl::StrFormat("<0x%02X>", byte));
    if (options.byte_units && bpe.byte_ids_[byte] < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "model.vocab: byte-level vocabulary lacks byte 0x%02X", byte));
    }
  }
  return bpe;
}

int32_t HfBpe::IdOf(absl::string_view token) const {
  const auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string& HfBpe::TokenOf(int32_t id) const {
  static const std::string* const kEmpty = new std::string();
  return id >= 0 && id < static_cast<int32_t>(tokens_.size()) ? tokens_[id]
                                                              : *kEmpty;
}

void HfBpe::InitialSymbols(absl::string_view word,
                           std::vector<int32_t>* ids) const {
  bool last_unk = false;
  for (size_t pos = 0; pos < word.size();) {
    const size_t len = options_.byte_units ? 1 : Utf8UnitLength(word, pos);
    const absl::string_view unit = word.substr(pos, len);
    pos += len;
    if (options_.byte_units) {
      ids->push_back(byte_ids_[static_cast<unsigned char>(unit[0])]);
      continue;
    }
    if (const int32_t id = IdOf(unit); id >= 0) {
      ids->push_back(id);
      last_unk = false;
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (char c : unit)
        all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (char c : unit)
          ids->push_back(byte_ids_[static_cast<unsigned char>(c)]);
        last_unk = false;
        continue;
      }
    }
    if (options_.unk_id >= 0 && !(options_.fuse_unk && last_unk)) {
      ids->push_back(options_.unk_id);
    }
    last_unk = options_.unk_id >= 0;
  }
}

void HfBpe::Encode(absl::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const int32_t id = IdOf(word); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  std::vector<int32_t> ids;
  InitialSymbols(word, &ids);
  const int n = static_cast<int>(ids.size());
  // Symbols form a doubly linked list; merged-away symbols get id -1.
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int pos;
    int32_t id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    const auto it = merges_.find(PairKey(ids[left], ids[next[left]]));
    if (it != merges_.end()) {
      queue.push(Candidate{it->second.rank, left, it->second.id});
    }
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const int right = ids[top.pos] < 0 ? -1 : next[top.pos];
    if (right < 0) continue;
    // Skip entries made stale by an earlier merge at either side.
    const auto it = merges_.find(PairKey(ids[top.pos], ids[right]));
    if (it == merges_.end() || it->second.id != top.id ||
        it->second.rank != top.rank) {
      continue;
    }
    ids[top.pos] = top.id;
    ids[right] = -1;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    consider(prev[top.pos]);
    consider(top.pos);
  }
  for (int i = 0; i >= 0 && i < n; i = next[i]) out->push_back(ids[i]);
}

}  // namespace flotilla::tokenizer
