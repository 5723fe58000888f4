#include "shared/placement/placement.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flotilla::placement {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<int> Layers(int first, int last) {
  std::vector<int> out;
  for (int l = first; l <= last; ++l) out.push_back(l);
  return out;
}

TEST(RotateTest, ReplicasAreDistinctAndEveryLayerUsesEveryWorker) {
  for (int workers = 1; workers <= 6; ++workers) {
    for (int replicas = 1; replicas <= workers; ++replicas) {
      auto p =
          Placement::Rotate(Layers(1, 12), 8 * workers + 3, workers, replicas);
      ASSERT_TRUE(p.ok()) << p.status();
      for (int layer : p->layers()) {
        std::vector<int> per_worker(workers, 0);
        for (int e = 0; e < p->num_experts(); ++e) {
          const int32_t* h = p->Holders(layer, e);
          ASSERT_NE(h, nullptr);
          std::set<int> distinct(h, h + replicas);
          EXPECT_EQ(distinct.size(), static_cast<size_t>(replicas));
          ++per_worker[h[0]];
        }
        // Primaries dealt round-robin: counts differ by at most one.
        const auto [lo, hi] =
            std::minmax_element(per_worker.begin(), per_worker.end());
        EXPECT_LE(*hi - *lo, 1) << workers << "/" << replicas;
      }
    }
  }
}

TEST(RotateTest, ReplicasOfOneWorkerSpreadOverAllOthers) {
  // When worker 0 dies, its experts' second holders should be all of 1..3.
  auto p = Placement::Rotate(Layers(1, 1), 64, 4, 2);
  ASSERT_TRUE(p.ok());
  std::set<int> backups;
  for (int e = 0; e < 64; ++e) {
    const int32_t* h = p->Holders(1, e);
    if (h[0] == 0) backups.insert(h[1]);
  }
  EXPECT_THAT(backups, ElementsAre(1, 2, 3));
}

TEST(RotateTest, OwnedListsPartitionWithOneReplica) {
  auto p = Placement::Rotate({1, 2}, 8, 2, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_THAT(p->Owned(0, 2), ElementsAre(0, 2, 4, 6));  // (e + 2) mod 2
  EXPECT_THAT(p->Owned(1, 1), ElementsAre(0, 2, 4, 6));  // (e + 1) mod 2
  EXPECT_EQ(p->OwnedCount(0) + p->OwnedCount(1), 16u);
  EXPECT_EQ(p->Holders(0, 0), nullptr);  // not a MoE layer here
  EXPECT_EQ(p->Holders(1, 8), nullptr);
}

TEST(RotateTest, RejectsBadShapes) {
  EXPECT_FALSE(Placement::Rotate({1}, 8, 0, 1).ok());
  EXPECT_FALSE(Placement::Rotate({1}, 8, 2, 3).ok());
  EXPECT_FALSE(Placement::Rotate({1}, 8, 2, 0).ok());
  EXPECT_FALSE(Placement::Rotate({1}, 0, 2, 1).ok());
  EXPECT_FALSE(Placement::Rotate({1, 1}, 8, 2, 1).ok());
}

TEST(JsonTest, RoundTripKeepsMapAndIdentity) {
  auto p = Placement::Rotate(Layers(1, 5), 10, 3, 2);
  ASSERT_TRUE(p.ok());
  p->set_worker(2);
  p->set_source_fingerprint("0123456789abcdef");
  auto q = Placement::FromJson(p->ToJson(), "test");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->workers(), 3);
  EXPECT_EQ(q->replicas(), 2);
  EXPECT_EQ(q->worker(), 2);
  EXPECT_EQ(q->source_fingerprint(), "0123456789abcdef");
  EXPECT_EQ(q->rule(), kRotateRule);
  for (int layer = 1; layer <= 5; ++layer) {
    for (int w = 0; w < 3; ++w) {
      EXPECT_EQ(q->Owned(w, layer), p->Owned(w, layer));
    }
  }
}

TEST(JsonTest, BadFilesNameTheProblem) {
  const struct {
    const char* text;
    const char* says;
  } cases[] = {
      {"{", "placement.json"},
      {R"({"format": "x"})", "not a placement file"},
      {R"({"format": "flotilla-placement", "version": 2, "workers": 1,
           "replicas": 1, "num_experts": 1, "layers": {"1": [[0]]}})",
       "version 2"},
      {R"({"format": "flotilla-placement", "version": 1, "workers": 2,
           "replicas": 3, "num_experts": 1, "layers": {"1": [[0]]}})",
       "replicas 3"},
      {R"({"format": "flotilla-placement", "version": 1, "workers": 2,
           "replicas": 2, "num_experts": 1, "layers": {"1": [[0, 0]]}})",
       "distinct"},
      {R"({"format": "flotilla-placement", "version": 1, "workers": 2,
           "replicas": 1, "num_experts": 2, "layers": {"1": [[0]]}})",
       "must list 2"},
      {R"({"format": "flotilla-placement", "version": 1, "workers": 2,
           "replicas": 1, "num_experts": 1, "layers": {"x": [[0]]}})",
       "layer key"},
      {R"({"format": "flotilla-placement", "version": 1, "workers": 2,
           "replicas": 1, "num_experts": 1, "worker": 2,
           "layers": {"1": [[5]]}})",
       "worker"},
  };
  for (const auto& c : cases) {
    auto p = Placement::FromJson(c.text, "placement.json");
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(c.says)) << c.text;
  }
}

}  // namespace
}  // namespace flotilla::placement
