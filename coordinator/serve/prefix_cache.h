// Sequence states kept after requests end, keyed by the token ids they hold,
// so that a request whose prompt starts with a kept sequence (a chat's next
// turn: the previous prompt and reply, then the new message) prefills only
// its new tokens. Results are the same as without it: a token's arithmetic
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

class PrefixCache {
 public:
  explicit PrefixCache(uint64_t budget_bytes) : budget_(budget_bytes) {}

  // The longest kept state whose ids are a proper prefix of `ids` (at least
  // one token of `ids` is left to run, so the caller gets logits), as a
  // copy; `*length` receives how many ids it holds. Null when none.
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
