#include "coordinator/serve/prefix_cache.h"

#include <algorithm>
#include <utility>

namespace flotilla::coordinator::serve {

size_t UsablePrefix(const std::vector<int32_t>& kept,
                    const std::vector<int32_t>& prompt) {
  if (prompt.empty()) return 0;
  const size_t limit = std::min(kept.size(), prompt.size() - 1);
  const auto split =
      std::mismatch(kept.begin(), kept.begin() + limit, prompt.begin());
  return static_cast<size_t>(split.first - kept.begin());
}

std::unique_ptr<ModelSequence> CutTo(std::unique_ptr<ModelSequence> state,
                                     size_t held, size_t length) {
  if (state == nullptr || length == held) return state;
  if (!state->Truncate(length)) return nullptr;
  // A copy holds no spare capacity for the positions cut away.
  return state->Clone();
}

std::unique_ptr<ModelSequence> PrefixCache::Find(
    const std::vector<int32_t>& ids, size_t* length) {
  // Candidates by how much they serve, most first; a state that cannot go
  // back to its share is passed over for the next.
  std::vector<std::pair<size_t, std::list<Entry>::iterator>> order;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const size_t usable = UsablePrefix(it->ids, ids);
    if (usable > 0) order.emplace_back(usable, it);
  }
  std::stable_sort(
      order.begin(), order.end(),
      [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [usable, it] : order) {
    std::unique_ptr<ModelSequence> state =
        CutTo(it->state->Clone(), it->ids.size(), usable);
    if (state == nullptr) continue;
    entries_.splice(entries_.begin(), entries_, it);  // most recent now
    *length = usable;
    ++hits_;
    reused_tokens_ += usable;
    return state;
  }
  return nullptr;
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
