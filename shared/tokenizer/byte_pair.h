// Rank-based byte-level BPE, id-exact with tiktoken's byte_pair_encode.
#ifndef FLOTILLA_SHARED_TOKENIZER_BYTE_PAIR_H_
#define FLOTILLA_SHARED_TOKENIZER_BYTE_PAIR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace flotilla::tokenizer {

// Token bytes -> rank. absl's string hashing is transparent, so lookups take
// an absl::string_view without building a std::string.
using RankMap = absl::flat_hash_map<std::string, int32_t>;

// Appends the ids of `piece` to `out`, as tiktoken does: if the whole piece
// is a token, that token; otherwise start from single bytes and repeatedly
// merge the adjacent pair whose concatenation has the lowest rank (leftmost
// on ties) until no adjacent concatenation is a token.
// Precondition (checked): every single byte that occurs in `piece` has a
// rank; TiktokenBpe::Create guarantees this for all 256 bytes.
void BytePairEncode(absl::string_view piece, const RankMap& ranks,
                    std::vector<int32_t>* out);

namespace internal {

// Pieces up to this many bytes use tiktoken's quadratic scan, which is
// faster for the short pieces real text produces; longer ones use a heap so
// that a pathological megabyte-long word costs O(n log n), not O(n^2).
inline constexpr size_t kHeapMergeThreshold = 128;

// The two merge strategies, exposed so tests can check they agree.
void BytePairMergeQuadratic(absl::string_view piece, const RankMap& ranks,
                            std::vector<int32_t>* out);
void BytePairMergeHeap(absl::string_view piece, const RankMap& ranks,
                       std::vector<int32_t>* out);

}  // namespace internal
}  // namespace flotilla::tokenizer

#endif  // FLOTILLA_SHARED_TOKENIZER_BYTE_PAIR_H_
