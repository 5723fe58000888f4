#include "shared/family/kimi_k3/kimi_k3_config.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/model/json_util.h"

namespace flotilla::model {
namespace {

using json = nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kK3 = std::string(FLOTILLA_TEST_DATA_DIR) + "/k3/";

json LoadJson(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr) << path;
  std::string text;
  char buf[4096];
  size_t n;
  while (f != nullptr && (n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
    text.append(buf, n);
  }
  if (f != nullptr) std::fclose(f);
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

absl::StatusOr<K3Config> Parse(const json& j) {
  return ParseK3Config(j.dump(), "test.json");
}

void ExpectSameConfig(const K3Config& a, const K3Config& b) {
#define FLOTILLA_EXPECT_FIELD(f) EXPECT_EQ(a.f, b.f) << #f
  FLOTILLA_EXPECT_FIELD(hidden_size);
  FLOTILLA_EXPECT_FIELD(num_hidden_layers);
  FLOTILLA_EXPECT_FIELD(vocab_size);
  FLOTILLA_EXPECT_FIELD(rms_norm_eps);
  FLOTILLA_EXPECT_FIELD(kda_num_heads);
  FLOTILLA_EXPECT_FIELD(kda_head_dim);
  FLOTILLA_EXPECT_FIELD(short_conv_kernel_size);
  FLOTILLA_EXPECT_FIELD(gate_lower_bound);
  FLOTILLA_EXPECT_FIELD(num_attention_heads);
  FLOTILLA_EXPECT_FIELD(q_lora_rank);
  FLOTILLA_EXPECT_FIELD(kv_lora_rank);
  FLOTILLA_EXPECT_FIELD(qk_nope_head_dim);
  FLOTILLA_EXPECT_FIELD(qk_rope_head_dim);
  FLOTILLA_EXPECT_FIELD(v_head_dim);
  FLOTILLA_EXPECT_FIELD(mla_use_output_gate);
  FLOTILLA_EXPECT_FIELD(num_experts);
  FLOTILLA_EXPECT_FIELD(num_experts_per_token);
  FLOTILLA_EXPECT_FIELD(num_shared_experts);
  FLOTILLA_EXPECT_FIELD(routed_expert_hidden_size);
  FLOTILLA_EXPECT_FIELD(moe_intermediate_size);
  FLOTILLA_EXPECT_FIELD(routed_scaling_factor);
  FLOTILLA_EXPECT_FIELD(moe_renormalize);
  FLOTILLA_EXPECT_FIELD(latent_moe_use_norm);
  FLOTILLA_EXPECT_FIELD(first_k_dense_replace);
  FLOTILLA_EXPECT_FIELD(intermediate_size);
  FLOTILLA_EXPECT_FIELD(attn_res_block_size);
  FLOTILLA_EXPECT_FIELD(situ_beta);
  FLOTILLA_EXPECT_FIELD(situ_linear_beta);
  FLOTILLA_EXPECT_FIELD(full_attn_layers);
#undef FLOTILLA_EXPECT_FIELD
}

TEST(K3ConfigTest, CkptAFlatValues) {
  auto c = LoadK3Config(kK3 + "ckpt_A/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hidden_size, 128);
  EXPECT_EQ(c->num_hidden_layers, 13);
  EXPECT_EQ(c->vocab_size, 256);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_EQ(c->kda_num_heads, 4);
  EXPECT_EQ(c->kda_head_dim, 16);
  EXPECT_EQ(c->short_conv_kernel_size, 4);
  EXPECT_EQ(c->gate_lower_bound, -5.0f);
  EXPECT_EQ(c->qk_nope_head_dim, 24);
  EXPECT_EQ(c->num_experts, 8);
  EXPECT_EQ(c->num_experts_per_token, 2);
  EXPECT_EQ(c->intermediate_size, 96);
  EXPECT_EQ(c->attn_res_block_size, 3);
  EXPECT_EQ(c->situ_beta, 4.0f);
  EXPECT_EQ(c->situ_linear_beta, 25.0f);
  EXPECT_EQ(c->full_attn_layers, (std::vector<int>{4, 8, 12, 13}));
  EXPECT_FALSE(c->IsMlaLayer(0));
  EXPECT_TRUE(c->IsMlaLayer(3));
  EXPECT_TRUE(c->IsMlaLayer(11));
  EXPECT_TRUE(c->IsMlaLayer(12));
  EXPECT_FALSE(c->IsMlaLayer(4));
  EXPECT_TRUE(c->IsDenseLayer(0));
  EXPECT_FALSE(c->IsDenseLayer(1));
}

TEST(K3ConfigTest, FlatAndNestedFormsParseIdentically) {
  for (const char* ckpt : {"ckpt_A", "ckpt_C"}) {
    SCOPED_TRACE(ckpt);
    auto flat = LoadK3Config(kK3 + ckpt + "/config.json");
    auto nested = LoadK3Config(kK3 + ckpt + "/config.nested.json");
    ASSERT_TRUE(flat.ok()) << flat.status();
    ASSERT_TRUE(nested.ok()) << nested.status();
    ExpectSameConfig(*flat, *nested);
  }
}

// Hostile JSON: a repeated key (the last one used to win) and nesting deep
// enough to crash the recursive printing of an error message are refused
// before any field is read.
TEST(K3ConfigTest, DuplicateKeysAndDeepNestingAreRefused) {
  auto text = model::internal::ReadSmallFile(kK3 + "ckpt_A/config.json");
  ASSERT_TRUE(text.ok()) << text.status();
  ASSERT_TRUE(ParseK3Config(*text, "config.json").ok());
  std::string twice = *text;
  twice.insert(twice.find('{') + 1, "\"hidden_size\": 7, ");
  auto dup = ParseK3Config(twice, "config.json");
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(std::string(dup.status().message()),
              AllOf(HasSubstr("config.json"),
                    HasSubstr("duplicate key \"hidden_size\"")));
  std::string deep = *text;
  deep.insert(deep.find('{') + 1, "\"x\": " + std::string(100000, '[') +
                                      std::string(100000, ']') + ", ");
  auto nested = ParseK3Config(deep, "config.json");
  ASSERT_FALSE(nested.ok());
  EXPECT_THAT(std::string(nested.status().message()),
              HasSubstr("nested deeper than 64 levels"));
}

// Float fields outside the ranges real checkpoints use are refused, not
// run (an eps of 9.2e18 flattened every activation), and so is a KDA gate
// the engine does not implement.
TEST(K3ConfigTest, FloatsOutOfRangeAndALowRankGateAreRefused) {
  auto text = model::internal::ReadSmallFile(kK3 + "ckpt_A/config.json");
  ASSERT_TRUE(text.ok()) << text.status();
  const struct {
    const char* key;
    nlohmann::json value;
    const char* why;
  } cases[] = {
      {"rms_norm_eps", 9.2e18, "rms_norm_eps: 9.2e+18 is outside (0, 0.1]"},
      {"rms_norm_eps", 0.0, "rms_norm_eps: 0 is outside (0, 0.1]"},
      {"routed_scaling_factor", -1.0, "routed_scaling_factor: -1 is outside"},
      {"gate_lower_bound", 3.0, "gate_lower_bound: 3 is outside [-1000, 0]"},
      {"situ_beta", 0.0, "situ_beta: 0 is outside"},
      {"use_full_rank_gate", false, "use_full_rank_gate: false"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.key);
    nlohmann::json j = nlohmann::json::parse(*text);
    j[c.key] = c.value;
    auto parsed = ParseK3Config(j.dump(), "config.json");
    ASSERT_FALSE(parsed.ok());
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(c.why));
  }
  nlohmann::json ok = nlohmann::json::parse(*text);
  ok["use_full_rank_gate"] = true;
  EXPECT_TRUE(ParseK3Config(ok.dump(), "config.json").ok());
}

TEST(K3ConfigTest, ReconstructedRealConfig) {
  auto c = LoadK3Config(kK3 + "real-config.reconstructed.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_hidden_layers, 93);
  EXPECT_EQ(c->hidden_size, 7168);
  EXPECT_EQ(c->kda_num_heads, 96);
  EXPECT_EQ(c->kda_head_dim, 128);
  EXPECT_EQ(c->num_experts, 896);
  EXPECT_EQ(c->num_experts_per_token, 16);
  EXPECT_EQ(c->situ_linear_beta, 25.0f);
  int mla = 0;
  for (int l = 0; l < c->num_hidden_layers; ++l) mla += c->IsMlaLayer(l);
  EXPECT_EQ(mla, 24);
  EXPECT_TRUE(c->IsMlaLayer(91));
  EXPECT_TRUE(c->IsMlaLayer(92));
  EXPECT_FALSE(c->IsMlaLayer(0));
}

struct RefusalCase {
  const char* file;
  const char* field;
  const char* detail;
};

TEST(K3ConfigTest, CfgFixturesAreRefused) {
  const RefusalCase cases[] = {
      {"no_layermap.json", "full_attn_layers", "missing"},
      {"bad_layer_index.json", "full_attn_layers", "999"},
      {"bad_topk.json", "num_experts_per_token", "128"},
  };
  for (const RefusalCase& rc : cases) {
    const std::string path = kK3 + "fixtures/cfg/" + rc.file;
    auto c = LoadK3Config(path);
    ASSERT_FALSE(c.ok()) << path;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(
        c.status().message(),
        AllOf(HasSubstr(path), HasSubstr(rc.field), HasSubstr(rc.detail)));
  }
}

TEST(K3ConfigTest, TopKAboveEngineMaximumNamesBothLimits) {
  json j = LoadJson(kK3 + "fixtures/cfg/bad_topk.json");
  auto c = Parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              AllOf(HasSubstr("maximum of 64"), HasSubstr("num_experts (8)")));
}

TEST(K3ConfigTest, ReportsEveryBadFieldAtOnce) {
  json j = LoadJson(kK3 + "ckpt_A/config.json");
  j.erase("vocab_size");
  j["hidden_size"] = "128";
  j["num_experts_per_token"] = 9;
  j["attn_res_block_size"] = 0;
  j["short_conv_kernel_size"] = 0;
  j["kv_lora_rank"] = -1;
  j["qk_rope_head_dim"] = 0;
  j["first_k_dense_replace"] = 14;
  j["situ_beta"] = "four";
  j["moe_renormalize"] = 1;
  j["kda_head_dim"] = 16.5;
  auto c = Parse(j);
  ASSERT_FALSE(c.ok());
  const std::string msg(c.status().message());
  for (const char* field :
       {"test.json", "vocab_size", "hidden_size", "num_experts_per_token",
        "attn_res_block_size", "short_conv_kernel_size", "kv_lora_rank",
        "qk_rope_head_dim", "first_k_dense_replace", "situ_beta",
        "moe_renormalize", "kda_head_dim", "11 problems"}) {
    EXPECT_THAT(msg, HasSubstr(field));
  }
}

TEST(K3ConfigTest, LayerListProblems) {
  json base = LoadJson(kK3 + "ckpt_A/config.json");
  const std::pair<json, const char*> cases[] = {
      {json::array(), "empty"},
      {json::array({4, "8"}), "full_attn_layers[1]"},
      {json::array({0, 4}), "outside 1..13"},
      {json::array({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}), "every layer"},
      {json::array({4, 4}), "twice"},
      {json(4), "an array"},
  };
  for (const auto& [layers, detail] : cases) {
    json j = base;
    j["full_attn_layers"] = layers;
    auto c = Parse(j);
    ASSERT_FALSE(c.ok()) << layers;
    EXPECT_THAT(c.status().message(),
                AllOf(HasSubstr("full_attn_layers"), HasSubstr(detail)));
  }
}

TEST(K3ConfigTest, RangeChecksOnCoreSizes) {
  json base = LoadJson(kK3 + "ckpt_A/config.json");
  for (const char* key :
       {"hidden_size", "num_hidden_layers", "vocab_size", "kda_num_heads",
        "num_experts", "q_lora_rank", "v_head_dim", "moe_intermediate_size"}) {
    json j = base;
    j[key] = 0;
    auto c = Parse(j);
    ASSERT_FALSE(c.ok()) << key;
    EXPECT_THAT(c.status().message(), HasSubstr(key));
  }
  json j = base;
  j["hidden_size"] = 1e12;  // integral but not an int
  EXPECT_THAT(Parse(j).status().message(), HasSubstr("32-bit"));
  j = base;
  j["hidden_size"] = 128.0;  // integral float is accepted
  EXPECT_TRUE(Parse(j).ok());
}

TEST(K3ConfigTest, OptionalBooleansDefaultToTrue) {
  json j = LoadJson(kK3 + "ckpt_A/config.json");
  j.erase("mla_use_output_gate");
  j.erase("moe_renormalize");
  j.erase("latent_moe_use_norm");
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->mla_use_output_gate);
  EXPECT_TRUE(c->moe_renormalize);
  EXPECT_TRUE(c->latent_moe_use_norm);
  j["moe_renormalize"] = false;
  c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->moe_renormalize);
}

TEST(K3ConfigTest, UnsupportedVariantsAreRefused) {
  json base = LoadJson(kK3 + "ckpt_A/config.json");
  json j = base;
  j["num_expert_group"] = 2;
  EXPECT_THAT(Parse(j).status().message(), HasSubstr("num_expert_group"));
  j = base;
  j["tie_word_embeddings"] = true;
  EXPECT_THAT(Parse(j).status().message(), HasSubstr("tie_word_embeddings"));
  j = base;
  j["quantization_config"] = {{"group_size", 16}};
  EXPECT_THAT(Parse(j).status().message(),
              HasSubstr("quantization_config.group_size"));
  j = base;
  j["num_expert_group"] = 1;
  j["tie_word_embeddings"] = false;
  j["quantization_config"] = {{"group_size", 32}};
  EXPECT_TRUE(Parse(j).ok()) << Parse(j).status();
}

TEST(K3ConfigTest, NestedKdaKeysAreNotShadowed) {
  json j = LoadJson(kK3 + "ckpt_A/config.nested.json");
  // Other attention's head_dim / num_heads at text_config or root level
  // must not replace the KDA values in linear_attn_config.
  j["text_config"]["head_dim"] = 999;
  j["text_config"]["num_heads"] = 7;
  j["num_heads"] = 5;
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->kda_num_heads, 4);
  EXPECT_EQ(c->kda_head_dim, 16);
}

TEST(K3ConfigTest, NestedProblemsNameTheNestedPath) {
  json j = LoadJson(kK3 + "ckpt_A/config.nested.json");
  j["text_config"]["linear_attn_config"].erase("num_heads");
  j["text_config"]["num_experts"] = "8";
  j["text_config"]["linear_attn_config"]["kda_layers"] = {1, 2};
  auto c = Parse(j);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(
      c.status().message(),
      AllOf(HasSubstr("kda_num_heads: missing"),
            HasSubstr("text_config.linear_attn_config.num_heads"),
            HasSubstr("text_config.num_experts"), HasSubstr("kda_layers")));
  j = LoadJson(kK3 + "ckpt_A/config.nested.json");
  j["text_config"]["linear_attn_config"] = 3;
  EXPECT_THAT(Parse(j).status().message(), HasSubstr("linear_attn_config"));
}

TEST(K3ConfigTest, GarbageJsonNamesFileAndPosition) {
  auto c = ParseK3Config("{\"hidden_size\": 128,\n  oops}", "/x/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(),
              AllOf(HasSubstr("/x/config.json"), HasSubstr("line 2")));
  for (const char* text : {"", "[1, 2]", "null", "\"str\""}) {
    auto bad = ParseK3Config(text, "cfg.json");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_THAT(bad.status().message(), HasSubstr("cfg.json"));
  }
}

TEST(K3ConfigTest, MissingFileNamesPath) {
  auto c = LoadK3Config("/nonexistent/dir/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("/nonexistent/dir/config.json"));
}

}  // namespace
}  // namespace flotilla::model
