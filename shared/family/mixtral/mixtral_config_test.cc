// Mixtral config.json parsing and the family choice from model_type.
#include "shared/family/mixtral/mixtral_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flotilla::model {
namespace {

using ::testing::HasSubstr;

// The embedded stories260k-moe config.
nlohmann::json Good() {
  return nlohmann::json::parse(R"({
    "architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
    "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 5,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 8,
    "vocab_size": 512, "max_position_embeddings": 512, "rope_theta": 10000.0,
    "rms_norm_eps": 1e-05, "hidden_act": "silu", "num_local_experts": 8,
    "num_experts_per_tok": 2, "tie_word_embeddings": true,
    "bos_token_id": 1, "eos_token_id": 2, "sliding_window": null})");
}

std::string Refusal(const nlohmann::json& j) {
  auto c = ParseMixtralConfig(j, "config.json");
  EXPECT_FALSE(c.ok()) << "accepted " << j.dump();
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(MixtralConfigTest, ParsesTheDemoModel) {
  auto c = ParseMixtralConfig(Good(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->num_key_value_heads, 4);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{2});
  const MoeSpec m = c->Moe();
  EXPECT_EQ(m.num_layers, 5);
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.num_experts_per_token, 2);
  EXPECT_EQ(m.intermediate_size, 172);
  EXPECT_EQ(m.expert_names.prefix, "model.");
  EXPECT_EQ(m.expert_names.scheme, &kBlockSparseMoeExperts);
  EXPECT_TRUE(std::isinf(m.gate_clamp) && std::isinf(m.up_clamp));
  EXPECT_FALSE(m.IsDenseLayer(0));
}

TEST(MixtralConfigTest, HeadDimDefaultsToHiddenOverHeads) {
  nlohmann::json j = Good();
  j.erase("head_dim");
  j.erase("num_key_value_heads");  // defaults to the head count
  auto c = ParseMixtralConfig(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->num_key_value_heads, 8);
}

TEST(MixtralConfigTest, HeadsNotDividingHiddenSize) {
  nlohmann::json j = Good();
  j.erase("head_dim");
  j["num_attention_heads"] = 6;
  j["num_key_value_heads"] = 3;
  EXPECT_THAT(
      Refusal(j),
      HasSubstr("num_attention_heads: 6 does not divide hidden_size 64"));
}

TEST(MixtralConfigTest, KvHeadsNotDividingHeads) {
  nlohmann::json j = Good();
  j["num_key_value_heads"] = 3;
  EXPECT_THAT(Refusal(j), HasSubstr("num_key_value_heads: 3 does not divide "
                                    "num_attention_heads 8"));
}

TEST(MixtralConfigTest, TopKAboveExperts) {
  nlohmann::json j = Good();
  j["num_experts_per_tok"] = 9;
  EXPECT_THAT(Refusal(j), HasSubstr("num_experts_per_tok: 9 is more than "
                                    "num_local_experts 8"));
}

TEST(MixtralConfigTest, EveryBadFieldNamedAtOnce) {
  nlohmann::json j = Good();
  j.erase("vocab_size");
  j["hidden_size"] = "64";
  j["rms_norm_eps"] = 0;
  j["hidden_act"] = "gelu";
  j["rope_scaling"] = {{"type", "yarn"}};
  const std::string m = Refusal(j);
  EXPECT_THAT(m, HasSubstr("config.json: invalid Mixtral config (5 problems)"));
  EXPECT_THAT(m, HasSubstr("vocab_size"));
  EXPECT_THAT(m, HasSubstr("hidden_size"));
  EXPECT_THAT(m, HasSubstr("rms_norm_eps"));
  EXPECT_THAT(m, HasSubstr("hidden_act"));
  EXPECT_THAT(m, HasSubstr("rope_scaling"));
}

}  // namespace
}  // namespace flotilla::model
