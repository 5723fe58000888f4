// The synthesized checkpoint has the release's layout (docs/k3-architecture.md
// section 2) and value distributions that keep a forward pass meaningful.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/model/safetensors.h"
#include "tools/synth.h"
#include "tools/synth_config.h"
#include "tools/synth_plan.h"
#include "tools/synth_test_util.h"

namespace flotilla::tools {
namespace {

namespace fs = std::filesystem;
using model::DType;
using model::SafetensorsCheckpoint;
using model::TensorInfo;

constexpr float kE2M1[16] = {0,   .5,  1,  1.5,  2,  3,  4,  6,
                             -0., -.5, -1, -1.5, -2, -3, -4, -6};

std::string Layer(int l) {
  return absl::StrCat("language_model.model.layers.", l, ".");
}

std::string ShardName(int i, int n) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model-%05d-of-%05d.safetensors", i, n);
  return buf;
}

class SynthLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TinyDirs().a;
    config_ = *SynthPresetConfig("k3-tiny");
    auto ckpt = SafetensorsCheckpoint::OpenDir(dir_);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    ckpt_ = std::move(*ckpt);
  }
  const TensorInfo& Info(const std::string& name) {
    const TensorInfo* t = ckpt_->Find(name);
    EXPECT_NE(t, nullptr) << name;
    static TensorInfo missing;
    return t ? *t : missing;
  }
  std::vector<uint8_t> Raw(const std::string& name) {
    const TensorInfo& t = Info(name);
    std::vector<uint8_t> out(t.nbytes);
    EXPECT_TRUE(ckpt_->ReadRaw(t, out.data()).ok());
    return out;
  }
  double Std(const std::string& name) {
    auto v = ckpt_->ReadF32(name, -1);
    EXPECT_TRUE(v.ok());
    double s = 0;
    for (float x : *v) s += double(x) * x;
    return std::sqrt(s / v->size());
  }

  std::string dir_;
  model::K3Config config_;
  std::unique_ptr<SafetensorsCheckpoint> ckpt_;
};

TEST_F(SynthLayoutTest, ExpertsAreContiguousInReleaseOrder) {
  const int n = config_.num_hidden_layers + 1;
  for (int l = 1; l < config_.num_hidden_layers; ++l) {
    for (int e = 0; e < config_.num_experts; ++e) {
      const std::string base =
          absl::StrCat(Layer(l), "block_sparse_moe.experts.", e, ".");
      uint64_t next = 0;
      for (const char* part :
           {"w1.weight_packed", "w1.weight_scale", "w2.weight_packed",
            "w2.weight_scale", "w3.weight_packed", "w3.weight_scale"}) {
        const TensorInfo& t = Info(base + part);
        EXPECT_EQ(t.dtype, DType::kU8);
        EXPECT_EQ(t.shape.size(), 2u);
        EXPECT_EQ(fs::path(t.file).filename(), ShardName(l + 1, n)) << part;
        if (next != 0) {
          EXPECT_EQ(t.offset, next) << base << part;
        }
        next = t.offset + t.nbytes;
      }
    }
  }
  // Experts follow their layer's trunk in the same shard; layer 0 is dense.
  EXPECT_EQ(
      ckpt_->Find(Layer(0) + "block_sparse_moe.experts.0.w1.weight_packed"),
      nullptr);
  EXPECT_EQ(fs::path(Info(Layer(0) + "mlp.down_proj.weight").file).filename(),
            ShardName(1, n));
  EXPECT_EQ(fs::path(Info("language_model.lm_head.weight").file).filename(),
            ShardName(n, n));
}

TEST_F(SynthLayoutTest, DtypesShapesAndHeaders) {
  EXPECT_EQ(Info(Layer(1) + "self_attn.q_proj.weight").dtype, DType::kBF16);
  EXPECT_EQ(Info(Layer(3) + "self_attn.kv_b_proj.weight").dtype, DType::kBF16);
  EXPECT_EQ(Info(Layer(1) + "block_sparse_moe.gate.weight").dtype,
            DType::kBF16);
  EXPECT_EQ(
      Info(Layer(1) + "block_sparse_moe.gate.e_score_correction_bias").dtype,
      DType::kF32);
  EXPECT_EQ(Info(Layer(1) + "input_layernorm.weight").dtype, DType::kF32);
  const int64_t p = config_.kda_num_heads * config_.kda_head_dim;
  EXPECT_EQ(Info(Layer(1) + "self_attn.q_conv1d.weight").shape,
            (std::vector<int64_t>{p, 1, config_.short_conv_kernel_size}));
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (e.path().extension() != ".safetensors") continue;
    std::ifstream in(e.path(), std::ios::binary);
    uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), 8);
    EXPECT_EQ(n % 8, 0u) << e.path();
  }
  // The index maps every tensor and counts data bytes only.
  std::ifstream in(dir_ + "/model.safetensors.index.json");
  const nlohmann::json index = nlohmann::json::parse(in);
  uint64_t total = 0;
  for (const std::string& name : ckpt_->Names()) total += Info(name).nbytes;
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(index["weight_map"].size(), ckpt_->Names().size());
  // The planned sizes are the written sizes.
  auto files = PlanSynthFiles(config_, 0);
  ASSERT_TRUE(files.ok());
  for (const SynthFile& f : *files) {
    EXPECT_EQ(fs::file_size(dir_ + "/" + f.name), f.bytes) << f.name;
  }
}

TEST_F(SynthLayoutTest, ValueScales) {
  const double e = config_.hidden_size;
  EXPECT_NEAR(Std(Layer(1) + "self_attn.q_proj.weight") * std::sqrt(e), 1.0,
              0.1);
  EXPECT_NEAR(Std("language_model.lm_head.weight") * std::sqrt(e), 1.0, 0.1);
  auto norm = *ckpt_->ReadF32(Layer(2) + "post_attention_layernorm.weight", -1);
  for (float x : norm) EXPECT_TRUE(x >= 0.9f && x <= 1.1f) << x;
  auto a_log = *ckpt_->ReadF32(Layer(1) + "self_attn.A_log", -1);
  ASSERT_EQ(a_log.size(), static_cast<size_t>(config_.kda_head_dim));
  for (size_t i = 0; i < a_log.size(); ++i) {
    if (static_cast<int>(i) < config_.kda_num_heads) {
      EXPECT_TRUE(a_log[i] >= 0 && a_log[i] < std::log(16.0f)) << a_log[i];
    } else {
      EXPECT_EQ(a_log[i], 0.0f);
    }
  }
  // MXFP4: no NaN scale, dequantised std ~ 1/sqrt(fan_in) for w1 and w2.
  for (const char* w : {"w1", "w2"}) {
    const std::string base =
        absl::StrCat(Layer(5), "block_sparse_moe.experts.3.", w, ".");
    const auto packed = Raw(base + "weight_packed");
    const auto scale = Raw(base + "weight_scale");
    const int64_t cols = Info(base + "weight_packed").shape[1] * 2;
    double sum2 = 0;
    for (size_t j = 0; j < packed.size() * 2; ++j) {
      const int r = static_cast<int>(j / cols), c = static_cast<int>(j % cols);
      const uint8_t s = scale[r * (cols / 32) + c / 32];
      ASSERT_NE(s, 255);
      const int nib = (packed[j / 2] >> (4 * (j % 2))) & 15;
      const double v = kE2M1[nib] * std::ldexp(1.0, s - 127);
      sum2 += v * v;
    }
    const double std = std::sqrt(sum2 / (packed.size() * 2));
    EXPECT_NEAR(std * std::sqrt(double(cols)), 1.0, 0.35) << w;
  }
}

TEST(SynthPlanTest, PresetSizes) {
  auto bench = PlanSynthFiles(*SynthPresetConfig("k3-bench"), 0);
  ASSERT_TRUE(bench.ok());
  uint64_t total = 0;
  for (const SynthFile& f : *bench) total += f.bytes;
  EXPECT_EQ(bench->size(), 24u + 1 + 2);
  EXPECT_GT(total, 9.0e9);
  EXPECT_LT(total, 9.6e9);
  EXPECT_EQ(Mxfp4ScaleBase(1024), 120);
  EXPECT_FALSE(PlanSynthCheckpoint(*SynthPresetConfig("k3-tiny"), 15).ok());
  model::K3Config odd = *SynthPresetConfig("k3-tiny");
  odd.moe_intermediate_size = 48;
  EXPECT_FALSE(PlanSynthFiles(odd, 0).ok());
}

TEST(SynthPlanTest, RefusesWhatTheDiskCannotHold) {
  const std::string dir = TinyDirs().root + "/space";
  absl::Status s = PrepareOutDir(dir, false, uint64_t{1} << 60);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("disk space"));
  EXPECT_TRUE(PrepareOutDir(dir, false, 1).ok());  // created, still empty
}

}  // namespace
}  // namespace flotilla::tools
