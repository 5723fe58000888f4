#include "shared/family/qwen3_moe/qwen3_moe_config.h"

#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "shared/family/family.h"

namespace flotilla::model {
namespace {

nlohmann::json FixtureConfig(const std::string& file = "ckpt_A/config.json") {
  std::ifstream in(std::string(FLOTILLA_TEST_DATA_DIR) + "/qwen3-moe/" + file);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

TEST(Qwen3MoeConfigTest, ReadsTheReleasedKeySet) {
  auto c = ParseQwen3MoeConfig(FixtureConfig(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 32);  // not hidden / heads (16)
  EXPECT_EQ(c->num_key_value_heads, 2);
  EXPECT_EQ(c->num_experts, 16);
  EXPECT_EQ(c->moe_intermediate_size, 32);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_EQ(c->rope_theta, 1e6);
  for (int l = 0; l < 4; ++l) EXPECT_TRUE(c->IsMoeLayer(l)) << l;
  auto family = family::ParseFamilyConfig(FixtureConfig().dump(), "c");
  ASSERT_TRUE(family.ok()) << family.status();
  EXPECT_EQ((*family)->family().name, "qwen3_moe");
  EXPECT_EQ((*family)->Moe().NumMoeLayers(), 4);
}

// mlp_only_layers and decoder_sparse_step place dense layers anywhere; the
// MoeSpec every expert reader uses knows each of them.
TEST(Qwen3MoeConfigTest, DenseLayersFromTheListAndTheStep) {
  nlohmann::json j = FixtureConfig();
  j["mlp_only_layers"] = {2};
  j["decoder_sparse_step"] = 2;  // MoE where (layer + 1) % 2 == 0
  auto c = ParseQwen3MoeConfig(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->IsMoeLayer(0));
  EXPECT_TRUE(c->IsMoeLayer(1));
  EXPECT_FALSE(c->IsMoeLayer(2));
  EXPECT_TRUE(c->IsMoeLayer(3));
  j["decoder_sparse_step"] = 1;
  auto family = family::ParseFamilyConfig(j.dump(), "c");
  ASSERT_TRUE(family.ok()) << family.status();
  const MoeSpec moe = (*family)->Moe();
  EXPECT_FALSE(moe.IsDenseLayer(1));
  EXPECT_TRUE(moe.IsDenseLayer(2));
  EXPECT_FALSE(moe.IsDenseLayer(3));
  EXPECT_EQ(moe.NumMoeLayers(), 3);
}

TEST(Qwen3MoeConfigTest, BadConfigsAreRefusedNamingTheField) {
  nlohmann::json bad = FixtureConfig();
  bad["mlp_only_layers"] = {1, 7};
  bad["num_key_value_heads"] = 3;
  bad["head_dim"] = 33;
  bad["attention_bias"] = true;
  bad["rope_scaling"] = {{"type", "yarn"}};
  bad.erase("num_experts");
  auto c = ParseQwen3MoeConfig(bad, "config.json");
  ASSERT_FALSE(c.ok());
  const std::string m(c.status().message());
  for (const char* field :
       {"mlp_only_layers: 7 is not a layer of 0..3",
        "num_key_value_heads: 3 does not divide num_attention_heads 4",
        "head_dim: 33 must be even", "attention_bias: true is not supported",
        "rope_scaling", "num_experts"}) {
    EXPECT_NE(m.find(field), std::string::npos) << field << " in " << m;
  }
  bad = FixtureConfig();
  bad["num_experts_per_tok"] = 17;
  c = ParseQwen3MoeConfig(bad, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(
                "num_experts_per_tok: 17 is more than num_experts 16"),
            absl::string_view::npos);
}

// Issue 44 item 9: a quantized release, a norm epsilon out of any sense and
// a sliding window of the wrong kind were accepted.
TEST(Qwen3MoeConfigTest, QuantizationEpsilonAndWindowAreChecked) {
  const std::pair<const char*, nlohmann::json> cases[] = {
      {"quantization_config",
       {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}},
      {"quantization_config", {{"quant_method", "mxfp4"}}},
      {"quantization_config", "x"},
      {"rms_norm_eps", 1e308},
      {"rms_norm_eps", 1.5},
      {"sliding_window", "x"},
      {"sliding_window", -4},
      {"max_window_layers", 2.5},
  };
  for (const auto& [key, value] : cases) {
    nlohmann::json bad = FixtureConfig();
    bad[key] = value;
    auto c = ParseQwen3MoeConfig(bad, "config.json");
    ASSERT_FALSE(c.ok()) << key << " " << value;
    EXPECT_NE(c.status().message().find(std::string(key) + ": "),
              absl::string_view::npos)
        << c.status();
  }
  nlohmann::json ok = FixtureConfig();
  ok["sliding_window"] = nullptr;
  ok["max_window_layers"] = 28;
  ok["quantization_config"] = nullptr;
  EXPECT_TRUE(ParseQwen3MoeConfig(ok, "config.json").ok());
}

}  // namespace
}  // namespace flotilla::model
