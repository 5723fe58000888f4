#include "shared/family/deepseek_v3/deepseek_v3_config.h"

#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace flotilla::model {
namespace {

nlohmann::json FixtureConfig() {
  std::ifstream in(std::string(FLOTILLA_TEST_DATA_DIR) +
                   "/deepseek-v3/ckpt_A/config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

TEST(DeepSeekV3ConfigTest, ReadsTheReleasedKeySet) {
  absl::StatusOr<DeepSeekV3Config> c =
      ParseDeepSeekV3Config(FixtureConfig(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hidden_size, 256);
  EXPECT_EQ(c->num_hidden_layers, 4);
  EXPECT_EQ(c->q_lora_rank, 96);
  EXPECT_EQ(c->kv_lora_rank, 64);
  EXPECT_EQ(c->qk_head_dim(), 48);
  EXPECT_EQ(c->n_routed_experts, 16);
  EXPECT_EQ(c->n_group, 4);
  EXPECT_EQ(c->topk_group, 2);
  EXPECT_EQ(c->first_k_dense_replace, 1);
  EXPECT_FALSE(c->IsMoeLayer(0));
  EXPECT_TRUE(c->IsMoeLayer(1));
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_FLOAT_EQ(c->routed_scaling_factor, 2.5f);
  EXPECT_EQ(c->num_nextn_predict_layers, 1);
  EXPECT_EQ(c->yarn_factor, 40);
  EXPECT_EQ(c->yarn_original_max_position, 4096);
  EXPECT_TRUE(c->fp8);
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{1});
  // The fixture README's derived softmax scale: 48^-0.5 (1 + 0.1 ln 40)^2.
  EXPECT_NEAR(c->SoftmaxScale(), 0.2704675577, 1e-10);
}

TEST(DeepSeekV3ConfigTest, BadConfigsAreRefusedNamingEveryField) {
  nlohmann::json bad = FixtureConfig();
  bad["n_group"] = 3;               // does not divide 16 experts
  bad["scoring_func"] = "softmax";  // DeepSeek-V2's router
  bad["moe_layer_freq"] = 2;
  bad["quantization_config"]["weight_block_size"] = {64, 64};
  bad.erase("kv_lora_rank");
  absl::StatusOr<DeepSeekV3Config> c =
      ParseDeepSeekV3Config(bad, "config.json");
  ASSERT_FALSE(c.ok());
  const std::string m(c.status().message());
  EXPECT_NE(m.find("(5 problems)"), std::string::npos) << m;
  for (const char* field :
       {"n_group: 3 does not divide n_routed_experts 16", "scoring_func",
        "moe_layer_freq: 2", "quantization_config", "kv_lora_rank"}) {
    EXPECT_NE(m.find(field), std::string::npos) << field << " in " << m;
  }
  bad = FixtureConfig();
  bad["topk_group"] = 5;
  c = ParseDeepSeekV3Config(bad, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("topk_group: 5 is above n_group 4"),
            absl::string_view::npos);
  bad = FixtureConfig();
  bad["n_group"] = 16;
  bad["topk_group"] = 4;
  c = ParseDeepSeekV3Config(bad, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(
      c.status().message().find("n_group: 16 leaves groups of one expert"),
      absl::string_view::npos);
  bad = FixtureConfig();
  bad["num_experts_per_tok"] = 9;  // 2 groups of 4 hold 8
  c = ParseDeepSeekV3Config(bad, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("num_experts_per_tok: 9 is more than"),
            absl::string_view::npos);
  bad = FixtureConfig();
  bad["rope_scaling"]["type"] = "linear";
  bad["first_k_dense_replace"] = 5;
  c = ParseDeepSeekV3Config(bad, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("rope_scaling: type \"linear\""),
            absl::string_view::npos);
  EXPECT_NE(c.status().message().find("first_k_dense_replace: 5 is past"),
            absl::string_view::npos);
}

// Sizes no model has are refused before the planner multiplies them out
// (they would overflow its byte counts or hang its loops), and so is an odd
// RoPE width; equal YaRN betas (Kimi K2's release) are not.
TEST(DeepSeekV3ConfigTest, SizesOutsideTheEnginesRangeAreRefused) {
  nlohmann::json bad = FixtureConfig();
  bad["hidden_size"] = 2000000000;
  bad["num_hidden_layers"] = 5000;
  bad["qk_rope_head_dim"] = 15;
  auto c = ParseDeepSeekV3Config(bad, "config.json");
  ASSERT_FALSE(c.ok());
  const std::string m(c.status().message());
  EXPECT_NE(m.find("hidden_size: 2000000000 must be in 1..1048576"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("num_hidden_layers: 5000 must be in 1..4096"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("qk_rope_head_dim: 15 must be even"), std::string::npos)
      << m;
  nlohmann::json k2 = FixtureConfig();
  k2["rope_scaling"]["beta_fast"] = 1.0;
  k2["rope_scaling"]["beta_slow"] = 1.0;
  EXPECT_TRUE(ParseDeepSeekV3Config(k2, "config.json").ok());
  k2["rope_scaling"]["beta_fast"] = 0.5;
  EXPECT_FALSE(ParseDeepSeekV3Config(k2, "config.json").ok());
}

}  // namespace
}  // namespace flotilla::model
