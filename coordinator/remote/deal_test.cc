#include "coordinator/remote/deal.h"

#include <algorithm>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flotilla::coordinator {
namespace {

using ::testing::ElementsAre;

// The largest number of items on one worker.
int MaxLoad(const std::vector<int>& deal, int num_workers) {
  std::vector<int> load(num_workers, 0);
  for (int w : deal) {
    if (w >= 0) ++load[w];
  }
  return *std::max_element(load.begin(), load.end());
}

// The best max load over every deal, by exhaustive search (small cases).
int BestMaxLoad(const std::vector<std::vector<int>>& candidates,
                int num_workers) {
  int best = static_cast<int>(candidates.size()) + 1;
  std::vector<int> deal(candidates.size(), -1);
  auto search = [&](auto&& self, size_t i) -> void {
    if (i == candidates.size()) {
      best = std::min(best, MaxLoad(deal, num_workers));
      return;
    }
    for (int w : candidates[i]) {
      deal[i] = w;
      self(self, i + 1);
    }
  };
  search(search, 0);
  return best;
}

TEST(DealItemsTest, WholeReplicasSpreadEvenly) {
  // 4 experts, each on both of 2 workers: 2 each, preferred holders first.
  EXPECT_THAT(DealItems({{0, 1}, {1, 0}, {0, 1}, {1, 0}}, 2),
              ElementsAre(0, 1, 0, 1));
}

TEST(DealItemsTest, MovesAnEarlierItemToMakeRoom) {
  // Item 0 prefers worker 0, but item 1 can only go there: item 0 moves.
  EXPECT_THAT(DealItems({{0, 1}, {0}}, 2), ElementsAre(1, 0));
}

TEST(DealItemsTest, SingleHoldersAreForced) {
  EXPECT_THAT(DealItems({{2}, {2}, {2}}, 3), ElementsAre(2, 2, 2));
}

// Totality: an item nobody holds, or whose holders are not workers, gets
// -1 instead of looping forever; the others are still dealt.
TEST(DealItemsTest, ItemsWithoutAHolderGetMinusOne) {
  EXPECT_THAT(DealItems({{}, {1}, {}}, 2), ElementsAre(-1, 1, -1));
  EXPECT_THAT(DealItems({{7, -1}, {0, 9}}, 2), ElementsAre(-1, 0));
  EXPECT_THAT(DealItems({{0}}, 0), ElementsAre(-1));
  EXPECT_TRUE(DealItems({}, 4).empty());
}

TEST(DealItemsTest, DuplicateCandidatesDoNotCountTwice) {
  EXPECT_THAT(DealItems({{0, 0, 1}, {0, 0}}, 2), ElementsAre(1, 0));
}

// Random small cases: every servable item is dealt to one of its
// candidates, the max load is the exhaustive optimum, and the same input
// gives the same deal.
TEST(DealItemsTest, OptimalOnRandomCases) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 300; ++trial) {
    const int workers = 1 + static_cast<int>(rng() % 4);
    const int items = static_cast<int>(rng() % 7);
    std::vector<std::vector<int>> candidates(items);
    for (auto& c : candidates) {
      for (int w = 0; w < workers; ++w) {
        if (rng() % 2) c.push_back(w);
      }
      if (c.empty()) c.push_back(static_cast<int>(rng() % workers));
      std::shuffle(c.begin(), c.end(), rng);
    }
    const std::vector<int> deal = DealItems(candidates, workers);
    ASSERT_EQ(deal.size(), candidates.size());
    for (size_t i = 0; i < deal.size(); ++i) {
      EXPECT_NE(std::find(candidates[i].begin(), candidates[i].end(), deal[i]),
                candidates[i].end())
          << "trial " << trial << " item " << i;
    }
    if (items > 0) {
      EXPECT_EQ(MaxLoad(deal, workers), BestMaxLoad(candidates, workers))
          << "trial " << trial;
    }
    EXPECT_EQ(DealItems(candidates, workers), deal);
  }
}

}  // namespace
}  // namespace flotilla::coordinator
