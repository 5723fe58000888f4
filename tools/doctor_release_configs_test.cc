// `flotilla-tool doctor` and the memory plan on the DeepSeek-V3 family (and
// Qwen3-MoE's releases, at the end): the
// released DeepSeek-V3 and Kimi K2 configs (tests/fixtures/deepseek-v3/
// release-configs, written from their published config.json fields) sized
// as stored (FP8 projections and experts, BF16 embeddings), planned at the
// 8 GiB laptop preset, and split over a 4-worker fleet; and ckpt_A's sizes
// from its headers equal to its pack plan's.
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "shared/model/safetensors.h"
#include "tools/doctor.h"
#include "tools/pack_plan.h"
#include "tools/pack_test_util.h"

namespace flotilla::tools {
namespace {

using testing::ScratchDir;

const std::string kFixtures =
    std::string(FLOTILLA_TEST_DATA_DIR) + "/deepseek-v3";

// One FP8 expert of hidden 7168 and width 2048: three 2048 x 7168 code
// matrices and their 16 x 56 float block scales.
constexpr uint64_t kReleasedExpert = 3 * (2048ull * 7168 + 16 * 56 * 4);

struct Release {
  const char* file;
  int moe_layers;
  int experts;
};

class ReleasedConfigTest : public ::testing::TestWithParam<Release> {};

TEST_P(ReleasedConfigTest, PlansAndFleetFromTheConfigAlone) {
  const Release r = GetParam();
  ScratchDir tmp("doctor_deepseek");
  std::filesystem::copy_file(kFixtures + "/release-configs/" + r.file,
                             tmp / "config.json");
  absl::StatusOr<ModelSizes> s = LoadModelSizes(tmp.path());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->config->family().name, "deepseek_v3");
  EXPECT_EQ(s->shape.expert_format, "fp8_e4m3");
  EXPECT_EQ(s->shape.moe_layers, r.moe_layers);
  EXPECT_EQ(s->shape.num_experts, r.experts);
  EXPECT_EQ(s->expert_run_bytes, kReleasedExpert);
  const std::vector<Prediction> preds =
      PredictPresets(*s, uint64_t{200} << 30, 4096, 3.0, 2.0);
  ASSERT_FALSE(preds.empty());
  EXPECT_EQ(preds[0].preset, "laptop");  // 8 GiB
  ASSERT_TRUE(preds[0].plan.ok()) << preds[0].plan.status();
  EXPECT_LT(preds[0].plan->pinned_layers, 61);
  // Every MoE layer's top-8 experts are read whatever the budget.
  EXPECT_EQ(preds[0].expert_read_bytes, r.moe_layers * 8 * kReleasedExpert);
  EXPECT_GT(preds[0].large_read_bytes, 0u);  // the unpinned layers
  EXPECT_GT(preds[0].seconds_per_token,
            (preds[0].expert_read_bytes + preds[0].large_read_bytes) / 3e9);
  // Four workers share each layer's experts and, on average, its top-8.
  const FleetReads f = PredictFleetReads(*s, 4);
  EXPECT_EQ(f.experts_held_per_layer, r.experts / 4);
  EXPECT_DOUBLE_EQ(f.mean_experts_per_token, 2.0 * r.moe_layers);
  EXPECT_EQ(f.most_experts_per_token, 8 * r.moe_layers);
  EXPECT_EQ(f.mean_bytes_per_token, 2ull * r.moe_layers * kReleasedExpert);
}

INSTANTIATE_TEST_SUITE_P(
    Releases, ReleasedConfigTest,
    ::testing::Values(Release{"deepseek-v3.config.json", 58, 256},
                      Release{"kimi-k2.config.json", 60, 384}));

TEST(DoctorDeepSeekV3, CheckpointSizesEqualThePackPlan) {
  const std::string ckpt = kFixtures + "/ckpt_A";
  absl::StatusOr<ModelSizes> s = LoadModelSizes(ckpt);
  ASSERT_TRUE(s.ok()) << s.status();
  // Its FP8 experts keep their scales apart from their codes, so they are
  // sized as a pack copies them.
  EXPECT_EQ(s->source, "checkpoint headers (experts as a pack will copy them)");
  // Three 64 x 256 code matrices, each with its block scales (1 x 2 or
  // 2 x 1 floats).
  EXPECT_EQ(s->expert_run_bytes, 3u * (64 * 256 + 2 * 4));
  auto source = model::SafetensorsCheckpoint::OpenDir(ckpt);
  ASSERT_TRUE(source.ok());
  auto plan = PlanPack(ckpt, **source);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(s->layer_region_bytes.size(), 4u);  // the MTP layer is not one
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(s->layer_region_bytes[l], plan->regions[l].layout.size);
  }
  EXPECT_EQ(s->trunk_bytes(), plan->trunk_bytes);
  EXPECT_EQ(plan->expert_format, "fp8_e4m3");
  EXPECT_EQ(plan->experts.size(), 3u * 16u);
}

// Qwen3-MoE's releases (BF16 experts, vocab resident): at 8 GiB
// Qwen3-30B-A3B's whole trunk is pinned and only its experts are read;
// Qwen3-235B-A22B streams most layers.
struct QwenRelease {
  const char* file;
  int layers;
  uint64_t expert_bytes;  // 3 x moe_intermediate x hidden x 2
  bool all_pinned_at_8g;
};

class QwenReleasedConfigTest : public ::testing::TestWithParam<QwenRelease> {};

TEST_P(QwenReleasedConfigTest, PlansFromTheConfigAlone) {
  const QwenRelease r = GetParam();
  ScratchDir tmp("doctor_qwen");
  std::filesystem::copy_file(std::string(FLOTILLA_TEST_DATA_DIR) +
                                 "/qwen3-moe/release-configs/" + r.file,
                             tmp / "config.json");
  absl::StatusOr<ModelSizes> s = LoadModelSizes(tmp.path());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->config->family().name, "qwen3_moe");
  EXPECT_EQ(s->shape.expert_format, "bf16");
  EXPECT_EQ(s->shape.moe_layers, r.layers);
  EXPECT_EQ(s->expert_run_bytes, r.expert_bytes);
  const std::vector<Prediction> preds =
      PredictPresets(*s, uint64_t{200} << 30, 4096, 3.0, 2.0);
  ASSERT_FALSE(preds.empty());
  ASSERT_TRUE(preds[0].plan.ok()) << preds[0].plan.status();  // laptop, 8G
  EXPECT_EQ(preds[0].expert_read_bytes, r.layers * 8 * r.expert_bytes);
  EXPECT_EQ(preds[0].plan->pinned_layers == r.layers, r.all_pinned_at_8g);
  EXPECT_EQ(preds[0].large_read_bytes == 0, r.all_pinned_at_8g);
}

INSTANTIATE_TEST_SUITE_P(
    Releases, QwenReleasedConfigTest,
    ::testing::Values(QwenRelease{"qwen3-30b-a3b.config.json", 48,
                                  3ull * 768 * 2048 * 2, true},
                      QwenRelease{"qwen3-235b-a22b.config.json", 94,
                                  3ull * 1536 * 4096 * 2, false}));

// gpt-oss's releases plan from their configs (the fused MXFP4 experts are
// sized as released: gate_up [2I][H] and down [H][I] at half a byte per
// weight plus a scale byte per 32, and their BF16 biases), though this
// build does not run them yet.
struct GptOssRelease {
  const char* file;
  int layers;
  bool all_pinned_at_4g;
};

class GptOssReleasedConfigTest
    : public ::testing::TestWithParam<GptOssRelease> {};

TEST_P(GptOssReleasedConfigTest, PlansFromTheConfigAlone) {
  const GptOssRelease r = GetParam();
  ScratchDir tmp("doctor_gpt_oss");
  std::filesystem::copy_file(std::string(FLOTILLA_TEST_DATA_DIR) +
                                 "/gpt-oss/release-configs/" + r.file,
                             tmp / "config.json");
  absl::StatusOr<ModelSizes> s = LoadModelSizes(tmp.path());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->config->family().name, "gpt_oss");
  // MXFP4 with a bias per matrix; the run as released (BF16 biases).
  EXPECT_EQ(s->shape.expert_format, "mxfp4_bias");
  const uint64_t expert = 2ull * 2880 * (1440 + 90) + 2 * 2880 * 2 +
                          2880ull * (1440 + 90) + 2880 * 2;
  EXPECT_EQ(s->expert_run_bytes, expert);
  const std::vector<Prediction> preds =
      PredictPresets(*s, uint64_t{200} << 30, 4096, 3.0, 2.0,
                     ComputeModel{.budgets = {{"4G", uint64_t{4} << 30}}});
  const Prediction& at8g = preds[0];                 // laptop
  const Prediction& at4g = preds[preds.size() - 2];  // the budgets, then auto
  ASSERT_EQ(at8g.preset, "laptop");
  ASSERT_EQ(at4g.preset, "4G");
  for (const Prediction* p : {&at8g, &at4g}) {
    SCOPED_TRACE(p->preset);
    ASSERT_TRUE(p->plan.ok()) << p->plan.status();
    // Neither budget holds every expert: each token reads its top-4 per
    // layer.
    EXPECT_EQ(p->expert_read_bytes, r.layers * 4 * expert);
  }
  EXPECT_EQ(at4g.plan->pinned_layers == r.layers, r.all_pinned_at_4g);
}

INSTANTIATE_TEST_SUITE_P(
    Releases, GptOssReleasedConfigTest,
    ::testing::Values(GptOssRelease{"gpt-oss-20b.config.json", 24, true},
                      GptOssRelease{"gpt-oss-120b.config.json", 36, false}));

}  // namespace
}  // namespace flotilla::tools
