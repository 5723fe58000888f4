#include "expert-worker/shard_plan.h"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/model/checkpoint_fingerprint.h"
#include "shared/model/safetensors.h"
#include "shared/placement/expert_split.h"
#include "shared/placement/placement.h"

namespace flotilla::expert_worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kCkptA = std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/ckpt_A";
const std::string kCkptC = std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/ckpt_C";

TEST(ParseShardSpecTest, AcceptsKOfN) {
  absl::StatusOr<ShardSpec> spec = ParseShardSpec("2/5");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->index, 2);
  EXPECT_EQ(spec->count, 5);
  spec = ParseShardSpec("0/1");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->count, 1);
}

TEST(ParseShardSpecTest, RejectsMalformedAndOutOfRange) {
  for (const char* bad :
       {"", "3", "1/", "/2", "a/b", "1/2/3", "2/2", "-1/2", "0/0", "5/3"}) {
    const absl::StatusOr<ShardSpec> spec = ParseShardSpec(bad);
    EXPECT_FALSE(spec.ok()) << bad;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ParseByteSizeTest, BinarySuffixes) {
  EXPECT_EQ(*ParseByteSize("1"), 1u);
  EXPECT_EQ(*ParseByteSize("4096B"), 4096u);
  EXPECT_EQ(*ParseByteSize("3K"), 3u << 10);
  EXPECT_EQ(*ParseByteSize("512M"), 512ull << 20);
  EXPECT_EQ(*ParseByteSize("8G"), 8ull << 30);
  EXPECT_EQ(*ParseByteSize("8g"), 8ull << 30);
  EXPECT_EQ(*ParseByteSize("8GiB"), 8ull << 30);
  EXPECT_EQ(*ParseByteSize("8GB"), 8ull << 30);
  EXPECT_EQ(*ParseByteSize("2T"), 2ull << 40);
}

TEST(ParseByteSizeTest, RejectsJunkZeroAndOverflow) {
  for (const char* bad : {"", "G", "8X", "8GX", "-1G", "1.5G", "0", "0G",
                          "99999999999T", "99999999999999999999"}) {
    EXPECT_FALSE(ParseByteSize(bad).ok()) << bad;
  }
}

PlanOptions Options(const std::string& dir, int k, int n, int replicas = 1) {
  PlanOptions o;
  o.model_dir = dir;
  o.shard = ShardSpec{k, n};
  o.shard_given = true;
  o.replicas = replicas;
  o.memory_budget_bytes = uint64_t{1} << 30;
  o.compute_threads = 3;
  return o;
}

TEST(BuildShardPlanTest, TinyCheckpoint) {
  const absl::StatusOr<ShardPlan> plan = BuildShardPlan(Options(kCkptA, 1, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  // ckpt_A: 13 layers, first_k_dense_replace 1, 8 experts, latent width 64.
  EXPECT_EQ(plan->num_layers, 13);
  EXPECT_EQ(plan->num_experts, 8);
  EXPECT_EQ(plan->row_width, 64);
  EXPECT_EQ(plan->owned_experts.size(), 12u);
  EXPECT_EQ(plan->owned_experts.count(0), 0u);  // the dense layer
  // rotate-v1: primary (e + layer) mod 2.
  EXPECT_THAT(plan->owned_experts.at(5), ElementsAre(0, 2, 4, 6));
  EXPECT_THAT(plan->owned_experts.at(4), ElementsAre(1, 3, 5, 7));
  EXPECT_EQ(plan->memory_budget_bytes, uint64_t{1} << 30);
  EXPECT_EQ(plan->compute_threads, 3);
  EXPECT_EQ(plan->placement, "rotate-v1");
  EXPECT_THAT(DescribeShardPlan(*plan), HasSubstr("shard 1/2"));
}

TEST(BuildShardPlanTest, ShardsPartitionOrReplicateEveryExpert) {
  for (int replicas : {1, 2, 3}) {
    std::multiset<std::pair<int, uint32_t>> all;
    for (int k = 0; k < 3; ++k) {
      auto plan = BuildShardPlan(Options(kCkptA, k, 3, replicas));
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(plan->replicas, replicas);
      for (const auto& [layer, experts] : plan->owned_experts) {
        for (uint32_t e : experts) all.insert({layer, e});
      }
    }
    ASSERT_EQ(all.size(), 12u * 8u * replicas);
    for (int layer = 1; layer < 13; ++layer) {
      for (uint32_t e = 0; e < 8; ++e) {
        EXPECT_EQ(all.count({layer, e}), static_cast<size_t>(replicas));
      }
    }
  }
}

TEST(BuildShardPlanTest, FingerprintIsTheSharedOne) {
  auto a = BuildShardPlan(Options(kCkptA, 0, 1));
  auto c = BuildShardPlan(Options(kCkptC, 0, 1));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(c.ok()) << c.status();
  auto ckpt = model::SafetensorsCheckpoint::OpenDir(kCkptA);
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ(a->model_fingerprint,
            *model::FingerprintCheckpoint(kCkptA, **ckpt));
  EXPECT_NE(a->model_fingerprint, c->model_fingerprint);
}

TEST(BuildShardPlanTest, CountsThatDoNotFitAreOutOfRange) {
  auto plan = BuildShardPlan(Options(kCkptA, 0, 9));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("9"));
  plan = BuildShardPlan(Options(kCkptA, 0, 2, 3));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("replicas"));
}

TEST(BuildShardPlanTest, PlacementFileNamesTheWorker) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      ("placement_plan_" + std::to_string(getpid()));  // one per process
  std::filesystem::create_directories(dir);
  auto p = placement::Placement::Rotate({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
                                        8, 4, 2);
  ASSERT_TRUE(p.ok());
  p->set_worker(3);
  const std::string file = (dir / "placement.json").string();
  std::ofstream(file) << p->ToJson();
  PlanOptions o = Options(kCkptA, 0, 1);
  o.shard_given = false;
  o.placement_file = file;
  auto plan = BuildShardPlan(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->shard.index, 3);
  EXPECT_EQ(plan->shard.count, 4);
  EXPECT_EQ(plan->replicas, 2);
  EXPECT_EQ(plan->owned_experts.at(7), p->Owned(3, 7));
  // A --shard that disagrees with the file is refused.
  o.shard_given = true;
  o.shard = ShardSpec{1, 4};
  EXPECT_EQ(BuildShardPlan(o).status().code(), absl::StatusCode::kOutOfRange);
  // A file made from another checkpoint is refused, naming both.
  p->set_source_fingerprint("00000000deadbeef");
  std::ofstream(file) << p->ToJson();
  o.shard_given = false;
  auto refused = BuildShardPlan(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("00000000deadbeef"));
}

// --split: worker K of a split fleet owns (a slice of) every expert of
// every MoE layer; a split.json that does not fit the config is refused.
TEST(BuildShardPlanTest, SplitFileOwnsEveryExpertAndMustFitTheConfig) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      ("split_plan_" + std::to_string(getpid()));  // one per process
  std::filesystem::create_directories(dir);
  placement::ExpertSplit split;
  split.workers = 3;
  split.worker = 2;
  split.intermediate = 64;
  split.latent = 64;
  split.source_fingerprint = "0123456789abcdef";
  const std::string file = (dir / "split.json").string();
  std::ofstream(file) << split.ToJson();
  PlanOptions o = Options(kCkptA, 0, 1);
  o.shard_given = false;
  o.split_file = file;
  auto plan = BuildShardPlan(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->split.has_value());
  EXPECT_EQ(plan->shard.index, 2);
  EXPECT_EQ(plan->shard.count, 3);
  EXPECT_EQ(plan->model_fingerprint, "0123456789abcdef");
  EXPECT_EQ(plan->owned_experts.size(), 12u);
  EXPECT_THAT(plan->owned_experts.at(5), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_THAT(DescribeShardPlan(*plan),
              HasSubstr("rows [42, 64) of w1/w3 and [42, 64) of w2"));
  // Cut from a model with another intermediate size.
  split.intermediate = 96;
  std::ofstream(file) << split.ToJson();
  auto refused = BuildShardPlan(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("intermediate size 96"));
  // --placement or --replicas beside --split.
  split.intermediate = 64;
  std::ofstream(file) << split.ToJson();
  o.replicas = 2;
  EXPECT_EQ(BuildShardPlan(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BuildShardPlanTest, MissingModelFails) {
  const absl::StatusOr<ShardPlan> plan =
      BuildShardPlan(Options("/nonexistent/flotilla-model", 0, 1));
  EXPECT_FALSE(plan.ok());
  EXPECT_NE(plan.status().code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace flotilla::expert_worker
