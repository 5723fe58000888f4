// End to end through Tokenizer::LoadKimi. The real tiktoken.model is not
// available, so the model directory is synthetic: cl100k_base ranks in
// tiktoken.model format plus the Kimi markers as added tokens after them.
// Golden ids come from tiktoken (fancy-regex) running the Kimi pattern over
// the same ranks, with the markers as special tokens.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/tokenizer/testdata_util.h"
#include "shared/tokenizer/tokenizer.h"

namespace flotilla::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::LoadJson;
using testing::Quote;
using testing::TestdataPath;

void WriteFile(const std::string& path, absl::string_view contents) {
  std::ofstream out(path, std::ios::binary);
  out.write(contents.data(), contents.size());
  ASSERT_TRUE(out.good()) << path;
}

// A fresh directory under the test temp dir, one per process: ctest runs
// every test of this suite in its own process, in parallel, and a shared
// directory let one process truncate tiktoken.model while another read it
// (SetUpTestSuite then failed, which gtest reports as skipped tests).
std::string MakeDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/kimi_tok_" + name + "_" +
                          std::to_string(getpid());
  mkdir(dir.c_str(), 0755);
  return dir;
}

// Writes tiktoken.model (cl100k ranks) and a tokenizer_config.json whose
// added tokens are `golden["special_tokens"]`.
std::string MakeKimiDir(const std::string& name, const nlohmann::json& golden) {
  const std::string dir = MakeDir(name);
  absl::StatusOr<std::string> ranks =
      ReadFileToString(TestdataPath("cl100k_base.tiktoken"));
  EXPECT_TRUE(ranks.ok()) << ranks.status();
  WriteFile(dir + "/tiktoken.model", ranks.ok() ? *ranks : "");
  nlohmann::json config;
  config["added_tokens_decoder"] = nlohmann::json::object();
  for (const auto& [content, id] : golden["special_tokens"].items()) {
    config["added_tokens_decoder"][std::to_string(id.get<int>())] = {
        {"content", content}, {"special", true}};
  }
  config["chat_template"] = "{{ messages }}";
  WriteFile(dir + "/tokenizer_config.json", config.dump(1));
  return dir;
}

class KimiTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    golden_ = new nlohmann::json(LoadJson("golden_kimi_cl100k.json"));
    corpus_ = new nlohmann::json(LoadJson("corpus.json"));
    if (golden_->is_discarded()) return;
    absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
        Tokenizer::LoadKimi(MakeKimiDir("good", *golden_));
    if (tok.ok()) {
      tokenizer_ = tok->release();
    } else {
      ADD_FAILURE() << tok.status();
    }
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete golden_;
    delete corpus_;
  }
  void SetUp() override { ASSERT_NE(tokenizer_, nullptr); }

  static Tokenizer* tokenizer_;
  static nlohmann::json* golden_;
  static nlohmann::json* corpus_;
};

Tokenizer* KimiTokenizerTest::tokenizer_ = nullptr;
nlohmann::json* KimiTokenizerTest::golden_ = nullptr;
nlohmann::json* KimiTokenizerTest::corpus_ = nullptr;

TEST_F(KimiTokenizerTest, VocabAndAddedTokens) {
  EXPECT_EQ(tokenizer_->vocab_size(), 100256 + 5);
  EXPECT_EQ(tokenizer_->AddedTokenId("[BOS]"), 100256);
  EXPECT_EQ(tokenizer_->AddedTokenId("<|end_of_msg|>"), 100260);
  EXPECT_EQ(tokenizer_->AddedTokenId("<|open"), -1);
}

TEST_F(KimiTokenizerTest, MatchesTiktokenWithKimiPattern) {
  int passed = 0, failed = 0;
  for (const auto& c : (*golden_)["cases"]) {
    const std::string text =
        (*corpus_)[c["set"].get<std::string>()][c["i"].get<size_t>()];
    const auto want = c["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got = tokenizer_->Encode(text);
    absl::StatusOr<std::string> decoded = tokenizer_->Decode(got);
    if (got == want && decoded.ok() && *decoded == text) {
      ++passed;
    } else if (++failed <= 10) {
      ADD_FAILURE() << c["set"] << " " << c["i"] << " " << Quote(text)
                    << "\n got " << absl::StrJoin(got, ",") << "\nwant "
                    << absl::StrJoin(want, ",");
    }
  }
  EXPECT_EQ(failed, 0);
  std::printf("Kimi pattern + cl100k ranks: %d/%zu match tiktoken\n", passed,
              (*golden_)["cases"].size());
}

TEST_F(KimiTokenizerTest, MarkersInsideText) {
  const int32_t open = tokenizer_->AddedTokenId("<|open|>");
  const int32_t sep = tokenizer_->AddedTokenId("<|sep|>");
  const std::vector<int32_t> ids = tokenizer_->Encode("<|open|>think<|sep|>");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], open);
  EXPECT_EQ(ids[2], sep);
  // A marker glued to words on both sides still splits out.
  const std::vector<int32_t> glued = tokenizer_->Encode("abc<|sep|>def");
  EXPECT_THAT(glued, ::testing::Contains(sep));
  EXPECT_EQ(*tokenizer_->Decode(glued), "abc<|sep|>def");
  // An incomplete marker is ordinary text.
  EXPECT_THAT(tokenizer_->Encode("<|sep|"),
              ::testing::Not(::testing::Contains(sep)));
}

// Encode is const and shared across request threads.
TEST_F(KimiTokenizerTest, ConcurrentEncodesAgree) {
  std::vector<std::string> texts;
  for (const auto& t : (*corpus_)["with_markers"]) texts.push_back(t);
  std::vector<std::vector<int32_t>> want;
  for (const std::string& t : texts) want.push_back(tokenizer_->Encode(t));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < texts.size() * 2; i += 3) {
        const size_t k = i % texts.size();
        if (tokenizer_->Encode(texts[k]) != want[k]) ++mismatches;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(KimiTokenizerTest, DecodeErrorsNameTheId) {
  absl::StatusOr<std::string> decoded = tokenizer_->Decode({1, 100261});
  ASSERT_FALSE(decoded.ok());
  EXPECT_THAT(decoded.status().message(), HasSubstr("100261"));
}

TEST(KimiLoadTest, MissingDirectoryIsNotFound) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      Tokenizer::LoadKimi("/nonexistent/kimi");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(tok.status().message(),
              HasSubstr("/nonexistent/kimi/tiktoken.model"));
}

TEST(KimiLoadTest, BadFilesAreErrorsNamingTheFile) {
  const std::string good_config =
      R"({"added_tokens_decoder": {"256": {"content": "[BOS]"}}})";
  // cl100k supplies a valid model with every single byte ranked.
  absl::StatusOr<std::string> model =
      ReadFileToString(TestdataPath("cl100k_base.tiktoken"));
  ASSERT_TRUE(model.ok());

  struct Case {
    std::string name, model, config, message;
    absl::StatusCode code;
  };
  const std::vector<Case> cases = {
      {"no_config", *model, "", "tokenizer_config.json",
       absl::StatusCode::kNotFound},
      {"bad_line", *model + "!!!! 5\n", good_config,
       "tiktoken.model:100257: invalid base64",
       absl::StatusCode::kInvalidArgument},
      {"bad_rank", "IQ== zero\n", good_config, "tiktoken.model:1: bad rank",
       absl::StatusCode::kInvalidArgument},
      {"bad_json", *model, "{\"added_tokens_decoder\": {", "invalid JSON",
       absl::StatusCode::kInvalidArgument},
      {"clash", *model,
       R"({"added_tokens_decoder": {"5": {"content": "[BOS]"}}})",
       "reuses BPE rank 5", absl::StatusCode::kInvalidArgument},
      {"few_bytes", "IQ== 0\n", good_config, "single byte 0x00",
       absl::StatusCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    const std::string dir = MakeDir(c.name);
    WriteFile(dir + "/tiktoken.model", c.model);
    std::remove((dir + "/tokenizer_config.json").c_str());
    if (!c.config.empty()) WriteFile(dir + "/tokenizer_config.json", c.config);
    absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::LoadKimi(dir);
    ASSERT_FALSE(tok.ok()) << c.name;
    EXPECT_EQ(tok.status().code(), c.code) << c.name << " " << tok.status();
    EXPECT_THAT(tok.status().message(), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(tok.status().message(), HasSubstr(dir)) << c.name;
  }
}

}  // namespace
}  // namespace flotilla::tokenizer
