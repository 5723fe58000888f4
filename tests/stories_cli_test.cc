// flotilla-coordinator on the embedded default model as a user runs it: the
// printed story is run.c's text, generation stops at the end of a story,
// and broken tokenizer.json / config.json files are refused by field, with
// exit code 1 and no crash.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "shared/testing/fixture.h"
#include "shared/testing/process.h"

namespace flotilla {
namespace {

namespace fs = std::filesystem;

std::string ModelDir() { return testutil::ModelPath("stories260k-moe"); }

class StoriesCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() /
           ("flotilla_stories_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
  }
  void TearDown() override { fs::remove_all(tmp_); }

  testutil::CommandResult Run(const std::string& args) {
    return testutil::RunCommand(
        testutil::BinPath("flotilla-coordinator") + " " + args, tmp_.string());
  }
  // A private copy of the model whose files a test may break.
  std::string CopyModel() {
    const fs::path dir = tmp_ / "model";
    fs::copy(ModelDir(), dir, fs::copy_options::recursive);
    return dir.string();
  }
  void ExpectRefused(const std::string& dir,
                     const std::vector<std::string>& needles) {
    const testutil::CommandResult r =
        Run("generate --model " + dir + " --prompt hi --max-tokens 2");
    EXPECT_TRUE(r.exited) << "crashed: " << r.err;
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    for (const std::string& n : needles) {
      EXPECT_NE(r.err.find(n), std::string::npos)
          << "stderr lacks '" << n << "': " << r.err;
    }
  }

  fs::path tmp_;
};

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, false);
}

TEST_F(StoriesCliTest, PrintsRunCsStory) {
  const nlohmann::json ref = ReadJson(ModelDir() + "/reference.json");
  ASSERT_TRUE(ref.contains("cases"));
  const nlohmann::json& c = ref["cases"][0];
  const testutil::CommandResult r =
      Run("generate --model " + ModelDir() + " --prompt '" +
          c["prompt"].get<std::string>() + "' --ignore-eos --max-tokens " +
          std::to_string(c["n_new"].get<int>()));
  ASSERT_TRUE(r.exited && r.code == 0) << r.err;
  // The prompt, then the continuation as it streamed out.
  EXPECT_EQ(r.out, c["text"].get<std::string>() + "\n");
}

TEST_F(StoriesCliTest, StopsAtTheEndOfTheStory) {
  const testutil::CommandResult r =
      Run("generate --model " + ModelDir() +
          " --prompt 'Once upon a time' --max-tokens 500 --json");
  ASSERT_TRUE(r.exited && r.code == 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(out.is_object()) << r.out;
  EXPECT_EQ(out["finish_reason"], "stop");
  const std::vector<int32_t> ids = out["generated_ids"];
  ASSERT_FALSE(ids.empty());
  EXPECT_LT(ids.size(), 500u);
  EXPECT_EQ(ids.back(), 1);  // the model begins the next story with <s>
  // --ignore-eos runs to --max-tokens.
  const testutil::CommandResult all =
      Run("generate --model " + ModelDir() +
          " --prompt 'Once upon a time' --max-tokens 500 --json --ignore-eos");
  ASSERT_TRUE(all.exited && all.code == 0) << all.err;
  EXPECT_EQ(nlohmann::json::parse(all.out)["generated_ids"].size(), 500u);
}

// `generate --plan` sizes the default model as it does Kimi K3: from its
// config alone, then from its pack, whose streamed layers are what each
// token reads once none is pinned.
TEST_F(StoriesCliTest, PlansTheDefaultModel) {
  const testutil::CommandResult text =
      Run("generate --model " + ModelDir() + " --plan");
  ASSERT_TRUE(text.exited && text.code == 0) << text.err;
  EXPECT_NE(text.out.find("model family: mixtral"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("predicted time per token"), std::string::npos)
      << text.out;

  const testutil::CommandResult r =
      Run("generate --model " + ModelDir() + " --plan --json");
  ASSERT_TRUE(r.exited && r.code == 0) << r.err;
  const nlohmann::json plan = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(plan.is_object()) << r.out;
  EXPECT_EQ(plan["family"], "mixtral");
  EXPECT_EQ(plan["num_layers"], 5);
  // The default 4096-position context is cut to the model's 512: 5 layers
  // x K and V x 4 kv heads x 8 floats per position.
  EXPECT_EQ(plan["charges"]["sequence_state"], 512 * 5 * 2 * 4 * 8 * 4);
  // The budget holds the 5 MoE layers' 8 experts, so they are all kept and
  // a token reads none of them.
  EXPECT_EQ(plan["charges"]["experts.cache"].get<uint64_t>(),
            5u * 8 * plan["expert_slot_bytes"].get<uint64_t>());
  EXPECT_EQ(plan["read_bytes_per_token"]["experts"], 0);
  // The forward pass reads its embedding and lm_head whole: both resident.
  EXPECT_EQ(plan["lm_head_pinned"], true);
  EXPECT_EQ(plan["embed_pinned"], true);
  EXPECT_GT(plan["predicted_seconds_per_token"].get<double>(), 0);

  const std::string dir = CopyModel();
  const testutil::CommandResult pack = testutil::RunCommand(
      testutil::BinPath("flotilla-tool") + " pack --model " + dir,
      tmp_.string());
  ASSERT_TRUE(pack.exited && pack.code == 0) << pack.err;
  const nlohmann::json manifest =
      ReadJson(dir + "/flotilla-pack/manifest.json");
  uint64_t layer_bytes = 0;
  for (const nlohmann::json& region : manifest["regions"]) {
    if (region["kind"] == "layer")
      layer_bytes += region["size"].get<uint64_t>();
  }
  ASSERT_GT(layer_bytes, 0u);
  const testutil::CommandResult pinned =
      Run("generate --model " + dir + " --plan --json");
  ASSERT_TRUE(pinned.exited && pinned.code == 0) << pinned.err;
  const nlohmann::json all = nlohmann::json::parse(pinned.out);
  EXPECT_EQ(all["pinned_layers"], 5);
  EXPECT_EQ(all["read_bytes_per_token"]["trunk"], 0);
  const testutil::CommandResult streamed =
      Run("generate --model " + dir + " --plan --json --max-pinned-layers 0");
  ASSERT_TRUE(streamed.exited && streamed.code == 0) << streamed.err;
  const nlohmann::json none = nlohmann::json::parse(streamed.out);
  EXPECT_EQ(none["pinned_layers"], 0);
  EXPECT_GE(none["ring_slots"].get<int>(), 2);
  EXPECT_EQ(none["read_bytes_per_token"]["trunk"].get<uint64_t>(), layer_bytes);
}

TEST_F(StoriesCliTest, TruncatedTokenizerJson) {
  const std::string dir = CopyModel();
  fs::resize_file(dir + "/tokenizer.json", 5000);
  ExpectRefused(dir, {"tokenizer.json", "parse error"});
}

TEST_F(StoriesCliTest, UnknownTokenizerModelType) {
  const std::string dir = CopyModel();
  nlohmann::json t = ReadJson(dir + "/tokenizer.json");
  t["model"]["type"] = "WordLevel";
  std::ofstream(dir + "/tokenizer.json", std::ios::trunc) << t.dump();
  ExpectRefused(dir, {"tokenizer.json", "model.type: unsupported 'WordLevel'"});
}

TEST_F(StoriesCliTest, MergeNamingAnUnknownToken) {
  const std::string dir = CopyModel();
  nlohmann::json t = ReadJson(dir + "/tokenizer.json");
  t["model"]["merges"][7] = "qqq zzz";
  std::ofstream(dir + "/tokenizer.json", std::ios::trunc) << t.dump();
  ExpectRefused(dir, {"model.merges[7]", "not in model.vocab"});
}

TEST_F(StoriesCliTest, BadMixtralConfigs) {
  const std::string dir = CopyModel();
  const nlohmann::json good = ReadJson(dir + "/config.json");
  auto write = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json c = good;
    c[key] = value;
    std::ofstream(dir + "/config.json", std::ios::trunc) << c.dump();
  };
  write("num_key_value_heads", 3);
  ExpectRefused(dir, {"config.json", "num_key_value_heads: 3 does not divide"});
  write("num_experts_per_tok", 9);
  ExpectRefused(dir, {"num_experts_per_tok: 9 is more than num_local_experts"});
  nlohmann::json c = good;
  c.erase("head_dim");
  c["num_attention_heads"] = 7;
  c["num_key_value_heads"] = 7;
  std::ofstream(dir + "/config.json", std::ios::trunc) << c.dump();
  ExpectRefused(dir, {"num_attention_heads: 7 does not divide hidden_size 64"});
  write("model_type", "llama4_text");
  ExpectRefused(dir, {"model_type 'llama4_text' is not supported"});
}

// --speculate ngram on a prompt that repeats itself: the same ids as plain
// decoding, greedy and sampled, with guesses kept; bad flags refused.
TEST_F(StoriesCliTest, SpeculateNgramGivesThePlainOutput) {
  const std::string base =
      "generate --model " + ModelDir() +
      " --prompt 'Lily saw a ball. Lily saw a ball. Lily saw a ball. Lily'"
      " --max-tokens 48 --json";
  // --speculate-always: the default drafts only while the measured pass
  // times say it pays, which a loaded machine can change, and the
  // assertions on accepted guesses below must not hang on timings.
  for (const std::string sampling : {"", " --temperature 0.8 --seed 3"}) {
    const testutil::CommandResult plain = Run(base + sampling);
    const testutil::CommandResult spec =
        Run(base + sampling +
            " --speculate ngram --draft-tokens 3 --speculate-always");
    const testutil::CommandResult paying =
        Run(base + sampling + " --speculate ngram --draft-tokens 3");
    ASSERT_TRUE(plain.exited && plain.code == 0) << plain.err;
    ASSERT_TRUE(spec.exited && spec.code == 0) << spec.err;
    ASSERT_TRUE(paying.exited && paying.code == 0) << paying.err;
    const nlohmann::json p = nlohmann::json::parse(plain.out);
    const nlohmann::json s = nlohmann::json::parse(spec.out);
    EXPECT_EQ(s["generated_ids"], p["generated_ids"]) << sampling;
    EXPECT_EQ(nlohmann::json::parse(paying.out)["generated_ids"],
              p["generated_ids"])
        << sampling;
    ASSERT_TRUE(s.contains("speculation")) << spec.out;
    EXPECT_GT(s["speculation"]["accepted_tokens"].get<int>(), 0) << sampling;
    EXPECT_GT(s["speculation"]["tokens_per_pass"].get<double>(), 1.0);
  }
  // A draft model (here the model itself) whose budget comes out of --mem.
  const testutil::CommandResult plain = Run(base);
  const testutil::CommandResult drafted = Run(
      base + " --mem 2G --draft-mem 512M --speculate-always --draft-model " +
      ModelDir());
  ASSERT_TRUE(drafted.exited && drafted.code == 0) << drafted.err;
  const nlohmann::json d = nlohmann::json::parse(drafted.out);
  EXPECT_EQ(d["generated_ids"],
            nlohmann::json::parse(plain.out)["generated_ids"]);
  EXPECT_EQ(d["stats"]["budget_bytes"].get<uint64_t>(), uint64_t{3} << 29);
  EXPECT_GT(d["speculation"]["accepted_tokens"].get<int>(), 0);
  const std::pair<const char*, const char*> bad_flags[] = {
      {" --mem 1G --draft-mem 2G --draft-model .",
       "--draft-mem (2G) must be a size below --mem (1G)"},
      {" --speculate ngram --draft-model .",
       "give --speculate or --draft-model, not both"},
      {" --speculate medusa", "unknown drafter 'medusa'"},
      {" --speculate ngram --draft-tokens 0",
       "--draft-tokens must be in 1..64"}};
  for (const auto& [bad, message] : bad_flags) {
    const testutil::CommandResult r = Run(base + bad);
    EXPECT_TRUE(r.exited && r.code == 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
}

// Issue 44 item 11: a draft model whose tokenizer has as many tokens but
// other ones (here ids 100 and 101 swapped), or none at all, is refused
// before it is opened.
TEST_F(StoriesCliTest, ADraftModelMustShareTheTokenizerNotOnlyItsSize) {
  const std::string draft = (tmp_ / "draft").string();
  fs::create_directories(draft);
  for (const char* f :
       {"config.json", "model.safetensors", "tokenizer_config.json"}) {
    fs::copy_file(ModelDir() + "/" + f, draft + "/" + f);
  }
  nlohmann::json tok =
      nlohmann::json::parse(std::ifstream(ModelDir() + "/tokenizer.json"));
  tok["model"]["vocab"]["<0x61>"] = 101;
  tok["model"]["vocab"]["<0x62>"] = 100;
  const std::string base = "generate --model " + ModelDir() +
                           " --prompt 'Once' --max-tokens 4 --mem 2G "
                           "--draft-mem 512M --draft-model " +
                           draft;
  testutil::CommandResult r = Run(base);
  EXPECT_TRUE(r.exited && r.code == 2) << r.err;
  EXPECT_NE(r.err.find("--draft-model: it has no tokenizer and the model "
                       "one; a draft model must share the model's tokenizer"),
            std::string::npos)
      << r.err;
  std::ofstream(draft + "/tokenizer.json") << tok.dump();
  r = Run(base);
  EXPECT_TRUE(r.exited && r.code == 2) << r.err;
  EXPECT_NE(r.err.find("--draft-model: token 100 is a in the model and b in "
                       "the draft; a draft model must share the model's "
                       "tokenizer"),
            std::string::npos)
      << r.err;
}

// Every SIMD path the CPU has gives the same logits, bit for bit, through
// the whole model (workers on other paths: distributed_equivalence_test).
TEST_F(StoriesCliTest, EverySimdLevelGivesTheSameLogits) {
  const std::string base = "generate --model " + ModelDir() +
                           " --prompt 'Once upon a time' --max-tokens 6";
  auto logits = [&](const std::string& flags) {
    const std::string file = (tmp_ / "logits.bin").string();
    const testutil::CommandResult r =
        Run(base + " --json --dump-logits " + file + flags);
    EXPECT_TRUE(r.exited && r.code == 0) << flags << ": " << r.err;
    // The run says which path computed it.
    const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    if (!flags.empty()) {
      EXPECT_EQ(" --simd " + j.value("simd", ""), flags);
    }
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string want = logits("");
  ASSERT_EQ(want.size(), 6u * 4 * 512);  // 6 steps x a 512-token vocabulary
  int levels = 0;
  for (const char* level : {"scalar", "avx2", "avx512", "highway"}) {
    const testutil::CommandResult probe =
        Run(base + " --max-tokens 1 --simd " + level);
    if (probe.code == 2 &&
        probe.err.find("this CPU has no") != std::string::npos) {
      continue;  // not on this CPU
    }
    EXPECT_EQ(logits(std::string(" --simd ") + level), want) << level;
    ++levels;
  }
  EXPECT_GE(levels, 2);  // scalar and highway at least, everywhere
  const testutil::CommandResult bad = Run(base + " --simd neon9");
  EXPECT_TRUE(bad.exited && bad.code == 2) << bad.err;
  EXPECT_NE(bad.err.find("--simd: unknown SIMD level \"neon9\""),
            std::string::npos)
      << bad.err;
}

}  // namespace
}  // namespace flotilla
