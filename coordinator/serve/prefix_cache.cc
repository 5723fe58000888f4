#include "coordinator/serve/prefix_cache.h"

#include <algorithm>
#include <utility>

namespace flotilla::coordinator::serve {

std::unique_ptr<ModelSequence> PrefixCache::Find(
    const std::vector<int32_t>& ids, size_t* length) {
  auto best = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const std::vector<int32_t>& k = it->ids;
    if (k.size() < ids.size() &&
        (best == entries_.end() || k.size() > best->ids.size()) &&
        std::equal(k.begin(), k.end(), ids.begin())) {
      best = it;
    }
  }
  if (best == entries_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, best);  // most recent now
  *length = best->ids.size();
  ++hits_;
  reused_tokens_ += best->ids.size();
  return best->state->Clone();
}

void PrefixCache::Put(std::vector<int32_t> ids,
                      std::unique_ptr<ModelSequence> state) {
  const uint64_t size = state->bytes() + ids.size() * sizeof(int32_t);
  if (size > budget_) return;
  // The same ids kept again replace the old entry. Shorter prefixes stay:
  // other conversations may branch there (a shared system prompt).
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->ids == ids) {
      bytes_ -= it->bytes;
      entries_.erase(it);
      break;
    }
  }
  entries_.push_front(Entry{std::move(ids), std::move(state), size});
  bytes_ += size;
  while (bytes_ > budget_) {
    bytes_ -= entries_.back().bytes;
    entries_.pop_back();
  }
}

}  // namespace flotilla::coordinator::serve
