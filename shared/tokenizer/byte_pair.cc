#include "shared/tokenizer/byte_pair.h"

#include <limits>
#include <queue>

#include "shared/base/check.h"

namespace flotilla::tokenizer {
namespace {

constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();

int32_t RankOf(const RankMap& ranks, absl::string_view bytes) {
  const auto it = ranks.find(bytes);
  return it == ranks.end() ? kNoRank : it->second;
}

// Final parts are either merged tokens (ranked by construction) or single
// bytes, whose presence is the documented precondition.
int32_t MustRank(const RankMap& ranks, absl::string_view bytes) {
  const int32_t rank = RankOf(ranks, bytes);
  FLOTILLA_CHECK(rank != kNoRank);
  return rank;
}

}  // namespace

namespace internal {

// tiktoken's _byte_pair_merge: parts[i].start is the first byte of part i
// and parts[i].rank the rank of part i concatenated with part i+1.
void BytePairMergeQuadratic(absl::string_view piece, const RankMap& ranks,
                            std::vector<int32_t>* out) {
  struct Part {
    size_t start;
    int32_t rank;
  };
  const size_t n = piece.size();
  std::vector<Part> parts;
  parts.reserve(n + 1);
  for (size_t i = 0; i < n; ++i) {
    parts.push_back(
        {i, i + 1 < n ? RankOf(ranks, piece.substr(i, 2)) : kNoRank});
  }
  parts.push_back({n, kNoRank});  // Sentinel: end of the last part.

  // Rank of merging part i with part i+1, given the current boundaries.
  auto pair_rank = [&](size_t i) {
    if (i + 2 >= parts.size()) return kNoRank;
    const size_t begin = parts[i].start;
    return RankOf(ranks, piece.substr(begin, parts[i + 2].start - begin));
  };
  while (true) {
    int32_t best = kNoRank;
    size_t best_i = 0;
    // Strict < keeps the leftmost of equal ranks, as tiktoken does.
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      if (parts[i].rank < best) {
        best = parts[i].rank;
        best_i = i;
      }
    }
    if (best == kNoRank) break;
    parts.erase(parts.begin() + best_i + 1);
    parts[best_i].rank = pair_rank(best_i);
    if (best_i > 0) parts[best_i - 1].rank = pair_rank(best_i - 1);
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    out->push_back(MustRank(
        ranks,
        piece.substr(parts[i].start, parts[i + 1].start - parts[i].start)));
  }
}

// Same merge order with a min-heap of (rank, start). Parts form a linked
// list indexed by their first byte; a per-part version number invalidates
// heap entries made stale by a neighbouring merge.
void BytePairMergeHeap(absl::string_view piece, const RankMap& ranks,
                       std::vector<int32_t>* out) {
  const uint32_t n = static_cast<uint32_t>(piece.size());
  std::vector<uint32_t> next(n), prev(n), version(n, 0);
  for (uint32_t i = 0; i < n; ++i) {
    next[i] = i + 1;  // n marks the end.
    prev[i] = i - 1;  // Wraps for i == 0; never read there.
  }
  struct Entry {
    int32_t rank;
    uint32_t start;
    uint32_t version;
    bool operator>(const Entry& o) const {
      return rank != o.rank ? rank > o.rank : start > o.start;
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto push_pair = [&](uint32_t i) {
    const uint32_t j = next[i];
    if (j >= n) return;
    const int32_t rank = RankOf(ranks, piece.substr(i, next[j] - i));
    if (rank != kNoRank) heap.push({rank, i, version[i]});
  };
  for (uint32_t i = 0; i + 1 < n; ++i) push_pair(i);

  while (!heap.empty()) {
    const Entry e = heap.top();
    heap.pop();
    if (e.version != version[e.start]) continue;
    const uint32_t i = e.start;
    const uint32_t j = next[i];
    next[i] = next[j];
    if (next[j] < n) prev[next[j]] = i;
    ++version[j];  // Part j is gone; drop its entries.
    ++version[i];
    push_pair(i);
    if (i > 0) {
      ++version[prev[i]];
      push_pair(prev[i]);
    }
  }
  for (uint32_t i = 0; i < n; i = next[i]) {
    out->push_back(MustRank(ranks, piece.substr(i, next[i] - i)));
  }
}

}  // namespace internal

void BytePairEncode(absl::string_view piece, const RankMap& ranks,
                    std::vector<int32_t>* out) {
  if (piece.empty()) return;
  // A piece that is itself a token is emitted whole even when pairwise
  // merging would not reach it; tiktoken checks this before merging.
  const auto it = ranks.find(piece);
  if (it != ranks.end()) {
    out->push_back(it->second);
    return;
  }
  if (piece.size() <= internal::kHeapMergeThreshold) {
    internal::BytePairMergeQuadratic(piece, ranks, out);
  } else {
    internal::BytePairMergeHeap(piece, ranks, out);
  }
}

}  // namespace flotilla::tokenizer
