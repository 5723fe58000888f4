// The per-expert view of gpt-oss's fused experts against the fused bytes
// read directly: gate = the even rows of the expert's gate_up slice, up =
// the odd rows, down its own slice, biases widened exactly; the fused
// tensors hidden; the cut tensors readable only through the view.
#include "shared/family/gpt_oss/gpt_oss_expert_view.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "shared/model/float16.h"
#include "shared/model/safetensors.h"

namespace flotilla::family::gpt_oss {
namespace {

constexpr int kI = 96, kH = 64, kE = 16;  // the fixture's sizes

std::string Dir() {
  return std::string(FLOTILLA_TEST_DATA_DIR) + "/gpt-oss/ckpt_A";
}

model::GptOssConfig Config() {
  std::ifstream in(Dir() + "/config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  auto c = model::ParseGptOssConfig(nlohmann::json::parse(ss.str()), "x");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

std::vector<uint8_t> Read(const model::TensorSource& s, const std::string& n) {
  const model::TensorInfo* t = s.Find(n);
  EXPECT_NE(t, nullptr) << n;
  if (t == nullptr) return {};
  std::vector<uint8_t> bytes(t->nbytes);
  EXPECT_TRUE(s.ReadRaw(*t, bytes.data()).ok()) << n;
  return bytes;
}

TEST(GptOssExpertViewTest, CutsEachExpertOutOfTheFusedTensors) {
  auto raw = model::SafetensorsCheckpoint::OpenDir(Dir());
  ASSERT_TRUE(raw.ok()) << raw.status();
  auto view = ExpertView::Create(**raw, Config());
  ASSERT_TRUE(view.ok()) << view.status();
  const std::string fused = "model.layers.2.mlp.experts.";
  const std::vector<uint8_t> blocks =
      Read(**raw, fused + "gate_up_proj_blocks");
  const std::vector<uint8_t> bias = Read(**raw, fused + "gate_up_proj_bias");
  const std::vector<uint8_t> down = Read(**raw, fused + "down_proj_scales");
  const int e = 11;
  const std::string p = "model.layers.2.mlp.experts.11.";
  const std::vector<uint8_t> gate = Read(**view, p + "gate_proj.weight_packed");
  const std::vector<uint8_t> up = Read(**view, p + "up_proj.weight_packed");
  const std::vector<uint8_t> up_bias = Read(**view, p + "up_proj.bias");
  ASSERT_EQ(gate.size(), size_t{kI} * kH / 2);
  ASSERT_EQ(up_bias.size(), size_t{kI} * 4);
  const size_t row = kH / 2, slice = size_t{2} * kI * row;
  for (int j = 0; j < kI; ++j) {
    EXPECT_EQ(
        std::memcmp(&gate[j * row], &blocks[e * slice + 2 * j * row], row), 0)
        << j;
    EXPECT_EQ(
        std::memcmp(&up[j * row], &blocks[e * slice + (2 * j + 1) * row], row),
        0)
        << j;
    uint16_t bits;
    std::memcpy(&bits, &bias[(e * 2 * kI + 2 * j + 1) * 2], 2);
    float got;
    std::memcpy(&got, &up_bias[j * 4], 4);
    EXPECT_EQ(got, model::Bf16ToF32(bits)) << j;
  }
  const std::vector<uint8_t> down_scale =
      Read(**view, p + "down_proj.weight_scale");
  const size_t down_slice = size_t{kH} * (kI / 32);
  ASSERT_EQ(down_scale.size(), down_slice);
  EXPECT_EQ(std::memcmp(down_scale.data(), &down[e * down_slice], down_slice),
            0);
  // The fused tensors are hidden; every expert has nine cut tensors.
  EXPECT_EQ((*view)->Find(fused + "gate_up_proj_blocks"), nullptr);
  int cut = 0;
  for (const std::string& n : (*view)->Names()) {
    EXPECT_EQ(n.find("_blocks"), std::string::npos) << n;
    cut += (*view)->Find(n)->derived ? 1 : 0;
  }
  EXPECT_EQ(cut, 4 * kE * 9);
  // The checkpoint itself will not read a cut tensor at the fused offset.
  std::vector<uint8_t> sink(gate.size());
  const absl::Status s = (*raw)->ReadRaw(
      *(*view)->Find(p + "gate_proj.weight_packed"), sink.data());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("read it through the view"), std::string::npos)
      << s;
}

TEST(GptOssExpertViewTest, RefusesDequantisedExperts) {
  auto raw = model::SafetensorsCheckpoint::OpenDir(Dir());
  ASSERT_TRUE(raw.ok()) << raw.status();
  model::GptOssConfig c = Config();
  c.mxfp4_experts = false;
  auto view = ExpertView::Create(**raw, c);
  ASSERT_FALSE(view.ok());
  EXPECT_NE(view.status().message().find("dequantised (BF16) experts"),
            std::string::npos)
      << view.status();
}

}  // namespace
}  // namespace flotilla::family::gpt_oss
