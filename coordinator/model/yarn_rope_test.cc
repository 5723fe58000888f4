// YaRN's inverse frequencies and attention factor against the DeepSeek-V3
// fixture's derived constants (tests/fixtures/deepseek-v3/ckpt_A/ref,
// computed by Hugging Face's code in float32).
#include "coordinator/model/yarn_rope.h"

#include <cmath>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace flotilla::coordinator {
namespace {

TEST(YarnRopeTest, EqualsTheFixturesDerivedConstants) {
  std::ifstream in(std::string(FLOTILLA_TEST_DATA_DIR) +
                   "/deepseek-v3/ckpt_A/ref/ref.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  const nlohmann::json& derived = ref["derived_constants"];
  YarnParams p;
  p.dim = 16;  // qk_rope_head_dim
  p.theta = 10000;
  p.factor = 163840.0 / 4096;  // max_position_embeddings / original
  p.original_max_position = 4096;
  p.beta_fast = 32;
  p.beta_slow = 1;
  p.mscale = 1.0;
  p.mscale_all_dim = 1.0;
  const std::vector<float> inv = YarnInvFreq(p);
  const std::vector<float> want =
      derived["rope_inv_freq"].get<std::vector<float>>();
  ASSERT_EQ(inv.size(), want.size());
  for (size_t i = 0; i < inv.size(); ++i) {
    EXPECT_EQ(inv[i], want[i]) << i;  // bit for bit
  }
  EXPECT_FLOAT_EQ(YarnAttentionFactor(p),
                  derived["rope_cos_sin_attention_factor"].get<float>());
  // Unscaled: plain RoPE frequencies, factor 1.
  p.factor = 1;
  p.mscale_all_dim = 0;
  EXPECT_FLOAT_EQ(YarnInvFreq(p)[1], 1.0f / std::pow(10000.0f, 2.0f / 16));
  EXPECT_FLOAT_EQ(YarnAttentionFactor(p), 1.0f);
}

// gpt-oss: rope_scaling.truncate false keeps the fractional correction
// range (low 4.046, high 8.699 for head_dim 32, theta 150000, factor 32);
// the fixture's ref.json holds the 16 frequencies Hugging Face computed.
TEST(YarnRopeTest, UntruncatedRangeEqualsTheGptOssFixture) {
  std::ifstream in(std::string(FLOTILLA_TEST_DATA_DIR) +
                   "/gpt-oss/ckpt_A/ref/ref.json");
  const nlohmann::json rope = nlohmann::json::parse(in)["rope"];
  YarnParams p;
  p.dim = 32;
  p.theta = 150000;
  p.factor = 32;
  p.original_max_position = 4096;
  p.beta_fast = 32;
  p.beta_slow = 1;
  p.truncate = false;
  const std::vector<float> inv = YarnInvFreq(p);
  const std::vector<float> want = rope["inv_freq"].get<std::vector<float>>();
  ASSERT_EQ(inv.size(), want.size());
  // Within one float ulp: torch's float32 pow is not correctly rounded
  // (theta^(6/32) comes out an ulp above the rounded value, theta^(8/32)
  // an ulp below), and this computes theta^(2i/d) rounded once.
  for (size_t i = 0; i < inv.size(); ++i) {
    EXPECT_LE(std::fabs(inv[i] - want[i]),
              std::nextafter(want[i], 2 * want[i]) - want[i])
        << i;
  }
  EXPECT_FLOAT_EQ(YarnAttentionFactor(p),
                  rope["attention_scaling"].get<float>());
  p.truncate = true;  // the floor/ceil range moves the ramp
  EXPECT_NE(YarnInvFreq(p)[5], want[5]);
}

}  // namespace
}  // namespace flotilla::coordinator
