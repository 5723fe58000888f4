// generation_config.json's sampling defaults: read as vLLM uses them,
// greedy under Hugging Face's do_sample rule, bad values named.
#include "coordinator/serve/generation_defaults.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "shared/testing/experts_test_util.h"

namespace flotilla::coordinator::serve {
namespace {

using experts::testing::TempDir;

void Write(const TempDir& dir, const std::string& text) {
  std::ofstream(dir.path() + "/generation_config.json") << text;
}

TEST(GenerationDefaultsTest, AReleasesRecommendedSamplingIsTheDefault) {
  TempDir dir;
  auto none = LoadGenerationDefaults(dir.path());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->sampler.temperature, 0.0f);
  EXPECT_NE(none->description.find("no generation_config.json"),
            std::string::npos);
  // Qwen3's own file.
  Write(dir, R"({"bos_token_id": 151643, "do_sample": true,
                 "eos_token_id": [151645, 151643], "pad_token_id": 151643,
                 "temperature": 0.6, "top_k": 20, "top_p": 0.95,
                 "transformers_version": "4.51.0"})");
  auto qwen = LoadGenerationDefaults(dir.path());
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  EXPECT_EQ(qwen->sampler.temperature, 0.6f);
  EXPECT_EQ(qwen->sampler.top_k, 20);
  EXPECT_EQ(qwen->sampler.top_p, 0.95f);
  EXPECT_NE(qwen->description.find("temperature 0.6"), std::string::npos);
  // Values listed without do_sample: greedy, as Hugging Face generates.
  Write(dir, R"({"temperature": 0.7, "top_p": 0.8})");
  auto listed = LoadGenerationDefaults(dir.path());
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->sampler.temperature, 0.0f);
  EXPECT_EQ(listed->sampler.top_p, 1.0f);
  EXPECT_NE(listed->description.find("do_sample"), std::string::npos);
}

TEST(GenerationDefaultsTest, BadValuesAreRefusedNamingTheField) {
  TempDir dir;
  for (const auto& [text, needle] :
       std::vector<std::pair<std::string, std::string>>{
           {R"({"do_sample": true, "temperature": -1})", "temperature"},
           {R"({"do_sample": true, "top_p": 0})", "top_p"},
           {R"({"do_sample": true, "top_k": 2.5})", "top_k"},
           {R"({"do_sample": "yes"})", "do_sample"},
           {R"({"do_sample": true, "repetition_penalty": "x"})",
            "repetition_penalty"},
           {"[1, 2]", "JSON object"},
           {"{", "generation_config.json"}}) {
    Write(dir, text);
    auto d = LoadGenerationDefaults(dir.path());
    ASSERT_FALSE(d.ok()) << text;
    EXPECT_NE(d.status().message().find(needle), std::string::npos)
        << d.status();
  }
}

}  // namespace
}  // namespace flotilla::coordinator::serve
