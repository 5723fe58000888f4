#include "coordinator/remote/deal.h"

#include <algorithm>
#include <cstddef>
#include <utility>

namespace flotilla::coordinator {
namespace {

// The smallest capacity for which a b-matching of items to candidate
// workers exists, found with augmenting paths; items in order, candidates
// in the given order.
class Dealer {
 public:
  Dealer(std::vector<std::vector<int>> candidates, int num_workers)
      : candidates_(std::move(candidates)), members_(num_workers) {}

  std::vector<int> Deal() {
    const size_t n = candidates_.size();
    std::vector<bool> any(members_.size(), false);
    size_t servable = 0;
    for (const auto& c : candidates_) {
      for (int w : c) any[w] = true;
      if (!c.empty()) ++servable;
    }
    const size_t live =
        std::max<size_t>(1, std::count(any.begin(), any.end(), true));
    // With every servable item on one worker the deal always exists, so
    // the search ends by cap == servable at the latest.
    for (cap_ = std::max<size_t>(1, (servable + live - 1) / live);; ++cap_) {
      assign_.assign(n, -1);
      for (auto& m : members_) m.clear();
      bool ok = true;
      for (size_t i = 0; i < n && ok; ++i) {
        if (candidates_[i].empty()) continue;
        visited_.assign(members_.size(), false);
        ok = Augment(static_cast<int>(i));
      }
      if (ok || cap_ >= servable) return assign_;
    }
  }

 private:
  bool Augment(int i) {
    for (int w : candidates_[i]) {
      if (visited_[w]) continue;
      visited_[w] = true;
      std::vector<int>& m = members_[w];
      if (m.size() < cap_) {
        m.push_back(i);
        assign_[i] = w;
        return true;
      }
      for (int& j : m) {
        const int moved = j;
        if (Augment(moved)) {  // `moved` now sits on another worker
          j = i;
          assign_[i] = w;
          return true;
        }
      }
    }
    return false;
  }

  const std::vector<std::vector<int>> candidates_;
  std::vector<std::vector<int>> members_;  // items on each worker
  std::vector<int> assign_;
  std::vector<bool> visited_;
  size_t cap_ = 1;
};

}  // namespace

std::vector<int> DealItems(const std::vector<std::vector<int>>& candidates,
                           int num_workers) {
  if (candidates.empty() || num_workers <= 0) {
    return std::vector<int>(candidates.size(), -1);
  }
  // Keep only real workers, once each, in the given order.
  std::vector<std::vector<int>> valid(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    for (int w : candidates[i]) {
      if (w >= 0 && w < num_workers &&
          std::find(valid[i].begin(), valid[i].end(), w) == valid[i].end()) {
        valid[i].push_back(w);
      }
    }
  }
  return Dealer(std::move(valid), num_workers).Deal();
}

}  // namespace flotilla::coordinator
