#include "shared/family/gpt_oss/gpt_oss_config.h"

#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace flotilla::model {
namespace {

nlohmann::json FixtureConfig() {
  std::ifstream in(std::string(FLOTILLA_TEST_DATA_DIR) +
                   "/gpt-oss/ckpt_A/config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

TEST(GptOssConfigTest, ReadsTheReleasedKeySet) {
  auto c = ParseGptOssConfig(FixtureConfig(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->num_local_experts, 16);
  EXPECT_EQ(c->num_experts_per_tok, 4);
  EXPECT_EQ(c->sliding_window, 4);
  EXPECT_EQ(c->sliding_layers, (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(c->yarn_factor, 32);
  EXPECT_EQ(c->yarn_original_max_position, 4096);
  EXPECT_FALSE(c->yarn_truncate);
  EXPECT_EQ(c->swiglu_limit, 7.0f);
  EXPECT_TRUE(c->mxfp4_experts);
  EXPECT_EQ(c->rms_norm_eps, 1e-5f);
}

TEST(GptOssConfigTest, BadConfigsAreRefusedNamingTheField) {
  nlohmann::json bad = FixtureConfig();
  bad["layer_types"] = {"sliding_attention", "full_attention"};
  bad["swiglu_limit"] = 0;
  bad["num_key_value_heads"] = 3;
  bad["quantization_config"] = {{"quant_method", "fp8"}};
  auto c = ParseGptOssConfig(bad, "config.json");
  ASSERT_FALSE(c.ok());
  const std::string m(c.status().message());
  for (const char* field :
       {"layer_types: must list num_hidden_layers (4) kinds, got 2",
        "swiglu_limit: 0 must be > 0",
        "num_key_value_heads: 3 does not divide num_attention_heads 4",
        "quantization_config"}) {
    EXPECT_NE(m.find(field), std::string::npos) << field << " in " << m;
  }
  bad = FixtureConfig();
  bad["layer_types"][1] = "chunked_attention";
  bad["sliding_window"] = nullptr;
  c = ParseGptOssConfig(bad, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(
                "\"chunked_attention\" is not sliding_attention or "
                "full_attention"),
            absl::string_view::npos)
      << c.status();
  bad = FixtureConfig();
  bad["sliding_window"] = nullptr;
  c = ParseGptOssConfig(bad, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("sliding_window"),
            absl::string_view::npos);
}

// Issue 44 item 8: the release's second top-k field and its list of
// unquantized modules are read, not ignored.
TEST(GptOssConfigTest, FieldsThatDisagreeOrChangeTheFormatAreRefused) {
  for (const nlohmann::json& k : {nlohmann::json(0), nlohmann::json(-1),
                                  nlohmann::json(17), nlohmann::json("4")}) {
    nlohmann::json bad = FixtureConfig();
    bad["experts_per_token"] = k;
    auto c = ParseGptOssConfig(bad, "config.json");
    ASSERT_FALSE(c.ok()) << k;
    EXPECT_NE(
        c.status().message().find("experts_per_token: " + k.dump() +
                                  " disagrees with num_experts_per_tok 4"),
        absl::string_view::npos)
        << c.status();
  }
  for (const nlohmann::json& modules :
       {nlohmann::json::array({"lm_head"}),
        nlohmann::json::array(
            {"model.layers.*.self_attn", "model.layers.*.mlp.router",
             "model.embed_tokens", "lm_head", "model.layers.*.mlp.experts"}),
        nlohmann::json("lm_head")}) {
    nlohmann::json bad = FixtureConfig();
    bad["quantization_config"]["modules_to_not_convert"] = modules;
    auto c = ParseGptOssConfig(bad, "config.json");
    ASSERT_FALSE(c.ok()) << modules;
    EXPECT_NE(c.status().message().find(
                  "quantization_config.modules_to_not_convert: " +
                  modules.dump() + " is not supported"),
              absl::string_view::npos)
        << c.status();
  }
  // The release's own values (either order of the list) are read.
  nlohmann::json ok = FixtureConfig();
  ok["quantization_config"]["modules_to_not_convert"] = {
      "lm_head", "model.embed_tokens", "model.layers.*.mlp.router",
      "model.layers.*.self_attn"};
  EXPECT_TRUE(ParseGptOssConfig(ok, "config.json").ok());
  nlohmann::json eps = FixtureConfig();
  eps["rms_norm_eps"] = 1e308;
  auto c = ParseGptOssConfig(eps, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("rms_norm_eps: 1e+308 must be in (0, 1)"),
            absl::string_view::npos)
      << c.status();
}

}  // namespace
}  // namespace flotilla::model
