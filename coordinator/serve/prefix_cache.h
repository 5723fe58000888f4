// Sequence states kept after requests end, keyed by the token ids they hold,
// so that a request whose prompt shares a beginning with a kept sequence (a
// chat's next turn: the previous prompt and reply, then the new message; a
// request repeated) prefills only its new tokens. The longest shared
// beginning counts, not only whole kept sequences: a state that can go back
// (ModelSequence::Truncate: every attention family's cache) is cut to it,
// so a next turn whose template renders the previous reply differently
// from how it was generated still resumes from the end of the previous
// prompt. Results are the same as without it: a token's arithmetic
// does not depend on which forward pass it runs in. Least recently used
// states go first once `budget_bytes` is reached.
//
// Thread-compatibility: used by the generation loop's thread only.
#ifndef FLOTILLA_COORDINATOR_SERVE_PREFIX_CACHE_H_
#define FLOTILLA_COORDINATOR_SERVE_PREFIX_CACHE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "coordinator/model/language_model.h"

namespace flotilla::coordinator::serve {

// How many of `prompt`'s ids a state kept for `kept` can serve: their
// common prefix, at most prompt.size() - 1.
size_t UsablePrefix(const std::vector<int32_t>& kept,
                    const std::vector<int32_t>& prompt);

// `state` cut back to `length` positions, as a new copy: the state itself
// when it holds exactly `length` (moved), else a truncated one, or null
// where the state cannot go back.
std::unique_ptr<ModelSequence> CutTo(std::unique_ptr<ModelSequence> state,
                                     size_t held, size_t length);

class PrefixCache {
 public:
  explicit PrefixCache(uint64_t budget_bytes) : budget_(budget_bytes) {}

  // A copy of the kept state that covers the most of `ids`: the longest
  // common prefix of its ids and `ids`, short of the last id (at least one
  // token is left to run, so the caller gets logits), cut back to it where
  // it holds more; `*length` receives how many ids it holds. Null when none.
  std::unique_ptr<ModelSequence> Find(const std::vector<int32_t>& ids,
                                      size_t* length);
  // Keeps `state`, which holds exactly `ids`. Dropped at once when larger
  // than the whole budget.
  void Put(std::vector<int32_t> ids, std::unique_ptr<ModelSequence> state);

  uint64_t bytes() const { return bytes_; }
  uint64_t hits() const { return hits_; }
  uint64_t reused_tokens() const { return reused_tokens_; }

 private:
  struct Entry {
    std::vector<int32_t> ids;
    std::unique_ptr<ModelSequence> state;
    uint64_t bytes = 0;
  };
  const uint64_t budget_;
  std::list<Entry> entries_;  // most recently used first
  uint64_t bytes_ = 0, hits_ = 0, reused_tokens_ = 0;
};

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_PREFIX_CACHE_H_
