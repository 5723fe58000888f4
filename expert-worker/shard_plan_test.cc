#include "expert-worker/shard_plan.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flotilla::expert_worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

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

TEST(OwnedExpertsTest, ShardsPartitionTheExperts) {
  constexpr int kExperts = 10;
  constexpr int kShards = 3;
  std::multiset<uint32_t> all;
  for (int k = 0; k < kShards; ++k) {
    for (uint32_t e : OwnedExperts(ShardSpec{k, kShards}, kExperts)) {
      EXPECT_EQ(static_cast<int>(e) % kShards, k);
      all.insert(e);
    }
  }
  ASSERT_EQ(all.size(), static_cast<size_t>(kExperts));
  for (int e = 0; e < kExperts; ++e) EXPECT_EQ(all.count(e), 1u) << e;
  EXPECT_THAT(OwnedExperts(ShardSpec{1, 3}, kExperts), ElementsAre(1, 4, 7));
}

TEST(BuildShardPlanTest, TinyCheckpoint) {
  const absl::StatusOr<ShardPlan> plan =
      BuildShardPlan(kCkptA, ShardSpec{1, 2}, uint64_t{1} << 30, 3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // ckpt_A: 13 layers, first_k_dense_replace 1, 8 experts, latent width 64.
  EXPECT_EQ(plan->num_layers, 13);
  EXPECT_EQ(plan->num_experts, 8);
  EXPECT_EQ(plan->row_width, 64);
  EXPECT_EQ(plan->owned_experts.size(), 12u);
  EXPECT_EQ(plan->owned_experts.count(0), 0u);  // the dense layer
  for (const auto& [layer, experts] : plan->owned_experts) {
    EXPECT_THAT(experts, ElementsAre(1, 3, 5, 7)) << layer;
  }
  EXPECT_EQ(plan->memory_budget_bytes, uint64_t{1} << 30);
  EXPECT_EQ(plan->compute_threads, 3);
  EXPECT_THAT(plan->model_fingerprint, StartsWith("cfg-xxh3:"));
  EXPECT_THAT(DescribeShardPlan(*plan), HasSubstr("shard 1/2"));
}

TEST(BuildShardPlanTest, ShardCountAboveExpertsIsOutOfRange) {
  const absl::StatusOr<ShardPlan> plan =
      BuildShardPlan(kCkptA, ShardSpec{0, 9}, 1 << 20, 1);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("9"));
}

TEST(BuildShardPlanTest, MissingModelFails) {
  const absl::StatusOr<ShardPlan> plan =
      BuildShardPlan("/nonexistent/flotilla-model", ShardSpec{}, 1 << 20, 1);
  EXPECT_FALSE(plan.ok());
  EXPECT_NE(plan.status().code(), absl::StatusCode::kOutOfRange);
}

TEST(ModelFingerprintTest, StableAndDistinguishesCheckpoints) {
  const absl::StatusOr<std::string> a1 = ModelFingerprint(kCkptA);
  const absl::StatusOr<std::string> a2 = ModelFingerprint(kCkptA);
  const absl::StatusOr<std::string> c = ModelFingerprint(kCkptC);
  ASSERT_TRUE(a1.ok()) << a1.status();
  ASSERT_TRUE(a2.ok()) << a2.status();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*a1, *a2);
  EXPECT_NE(*a1, *c);
  EXPECT_EQ(a1->size(), std::string("cfg-xxh3:").size() + 16);
}

TEST(ModelFingerprintTest, CorruptSafetensorsHeaderIsAnError) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "fingerprint_corrupt";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kCkptA + "/config.json", dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  {
    // Claims a header far larger than the file: must not be trusted.
    std::ofstream out(dir / "model.safetensors", std::ios::binary);
    const unsigned char prefix[8] = {0xff, 0xff, 0xff, 0xff,
                                     0xff, 0xff, 0xff, 0x7f};
    out.write(reinterpret_cast<const char*>(prefix), sizeof(prefix));
  }
  const absl::StatusOr<std::string> fp = ModelFingerprint(dir.string());
  EXPECT_EQ(fp.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(fp.status().message()),
              HasSubstr("model.safetensors"));
}

}  // namespace
}  // namespace flotilla::expert_worker
