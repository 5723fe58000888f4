#include "shared/tokenizer/tiktoken_bpe.h"

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/tokenizer/testdata_util.h"

namespace flotilla::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::LoadBpe;
using testing::LoadJson;
using testing::Quote;

// Compares EncodeOrdinary on every corpus string with tiktoken's ids, and
// checks that decoding gives the text back.
void ExpectMatchesGolden(const TiktokenBpe& bpe,
                         const std::string& golden_file) {
  const nlohmann::json corpus = LoadJson("corpus.json");
  const nlohmann::json golden = LoadJson(golden_file);
  ASSERT_FALSE(corpus.is_discarded() || golden.is_discarded());
  const auto& texts = corpus["plain"];
  const auto& cases = golden["cases"];
  ASSERT_EQ(texts.size(), cases.size());
  EXPECT_EQ(bpe.num_ranks(), golden["n_ranks"].get<int>());
  int passed = 0, failed = 0;
  for (const auto& c : cases) {
    const std::string text = texts[c["i"].get<size_t>()].get<std::string>();
    const auto want = c["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got = bpe.EncodeOrdinary(text);
    absl::StatusOr<std::string> decoded = bpe.Decode(got);
    if (got == want && decoded.ok() && *decoded == text) {
      ++passed;
    } else if (++failed <= 10) {
      ADD_FAILURE() << golden_file << " case " << c["i"] << " " << Quote(text)
                    << "\n got " << absl::StrJoin(got, ",") << "\nwant "
                    << absl::StrJoin(want, ",");
    }
  }
  EXPECT_EQ(failed, 0);
  std::printf("%s: %d/%zu match tiktoken\n", golden_file.c_str(), passed,
              cases.size());
}

TEST(TiktokenBpeTest, Cl100kMatchesTiktoken) {
  std::unique_ptr<TiktokenBpe> bpe =
      LoadBpe("cl100k_base.tiktoken", Pretokenizer::Cl100k());
  ASSERT_NE(bpe, nullptr);
  EXPECT_EQ(bpe->vocab_size(), 100256);
  EXPECT_THAT(bpe->Encode("hello world"), ElementsAre(15339, 1917));
  ExpectMatchesGolden(*bpe, "golden_cl100k.json");
}

TEST(TiktokenBpeTest, O200kMatchesTiktoken) {
  std::unique_ptr<TiktokenBpe> bpe =
      LoadBpe("o200k_base.tiktoken", Pretokenizer::O200k());
  ASSERT_NE(bpe, nullptr);
  ExpectMatchesGolden(*bpe, "golden_o200k.json");
}

// Random byte strings, mostly invalid UTF-8: encoding must be total and
// lossless even though tiktoken itself only accepts valid strings.
TEST(TiktokenBpeTest, RandomBytesRoundTrip) {
  std::unique_ptr<TiktokenBpe> bpe =
      LoadBpe("cl100k_base.tiktoken", Pretokenizer::Kimi());
  ASSERT_NE(bpe, nullptr);
  const std::string fragments[] = {"hello",        " world",
                                   "\xe4\xbd\xa0", "\xe4\xbd",
                                   "\xbd",         "\xf0\x9f\x98\x80",
                                   "\xf0\x9f",     "\xed\xa0\x80",
                                   "\xc0\xaf",     "\xf4\x90\x80\x80",
                                   "\r\n",         "  ",
                                   "'s",           "123",
                                   "\xcc\x81",     "\x00"};
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    const int len = rng() % 80;
    for (int i = 0; i < len; ++i) {
      if (iter % 2 == 0) {
        text.push_back(static_cast<char>(rng() % 256));
      } else {
        text += fragments[rng() % std::size(fragments)];
      }
    }
    const std::vector<int32_t> ids = bpe->Encode(text);
    absl::StatusOr<std::string> decoded = bpe->Decode(ids);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    ASSERT_EQ(*decoded, text) << Quote(text);
  }
}

// A tiny tokenizer with all single bytes plus chosen added tokens.
std::unique_ptr<TiktokenBpe> TinyWithAdded(std::vector<AddedToken> added) {
  std::vector<RankEntry> ranks;
  for (int b = 0; b < 256; ++b) ranks.push_back({std::string(1, char(b)), b});
  absl::StatusOr<std::unique_ptr<Pretokenizer>> pre = Pretokenizer::Kimi();
  if (!pre.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<TiktokenBpe>> bpe =
      TiktokenBpe::Create(std::move(ranks), *std::move(pre), std::move(added));
  return bpe.ok() ? *std::move(bpe) : nullptr;
}

TEST(TiktokenBpeTest, AddedTokensLeftmostThenLongest) {
  std::unique_ptr<TiktokenBpe> bpe = TinyWithAdded({{300, "<|"},
                                                    {301, "<|open|>"},
                                                    {302, "bcdef"},
                                                    {303, "ab"},
                                                    {304, "<|open|>think"}});
  ASSERT_NE(bpe, nullptr);
  // Longest at the same position.
  EXPECT_THAT(bpe->Encode("<|open|>x"), ElementsAre(301, 'x'));
  EXPECT_THAT(bpe->Encode("<|open|>think"), ElementsAre(304));
  EXPECT_THAT(bpe->Encode("<|ope"), ElementsAre(300, 'o', 'p', 'e'));
  // Leftmost beats longer-but-later: "ab" at 0 hides "bcdef" at 1.
  EXPECT_THAT(bpe->Encode("abcdef"), ElementsAre(303, 'c', 'd', 'e', 'f'));
  EXPECT_THAT(bpe->Encode("xbcdef!"), ElementsAre('x', 302, '!'));
  // In the middle of text, back to back, and at the ends.
  EXPECT_THAT(bpe->Encode("q<|open|><|open|>"), ElementsAre('q', 301, 301));
  EXPECT_EQ(bpe->AddedTokenId("<|open|>"), 301);
  EXPECT_EQ(bpe->AddedTokenId("<|nope|>"), -1);
  EXPECT_EQ(bpe->vocab_size(), 305);
  // Ordinary encoding ignores added tokens.
  EXPECT_EQ(bpe->EncodeOrdinary("ab").size(), 2u);
  EXPECT_EQ(*bpe->Decode({301, 'x', 304}), "<|open|>x<|open|>think");
}

TEST(TiktokenBpeTest, DecodeRejectsUnknownIds) {
  std::unique_ptr<TiktokenBpe> bpe = TinyWithAdded({{300, "[BOS]"}});
  ASSERT_NE(bpe, nullptr);
  absl::StatusOr<std::string> decoded = bpe->Decode({'a', 299});
  ASSERT_FALSE(decoded.ok());
  EXPECT_THAT(decoded.status().message(), HasSubstr("unknown token id 299"));
  EXPECT_FALSE(bpe->Decode({-1}).ok());
}

TEST(TiktokenBpeTest, CreateValidates) {
  auto make = [](std::vector<RankEntry> ranks, std::vector<AddedToken> added) {
    return TiktokenBpe::Create(std::move(ranks), *Pretokenizer::Kimi(),
                               std::move(added))
        .status();
  };
  std::vector<RankEntry> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back({std::string(1, char(b)), b});
  EXPECT_TRUE(make(bytes, {}).ok());

  std::vector<RankEntry> missing(bytes.begin() + 1, bytes.end());
  EXPECT_THAT(make(missing, {}).message(), HasSubstr("single byte 0x00"));
  std::vector<RankEntry> dup_rank = bytes;
  dup_rank.push_back({"ab", 5});
  EXPECT_THAT(make(dup_rank, {}).message(), HasSubstr("duplicate rank 5"));
  std::vector<RankEntry> dup_bytes = bytes;
  dup_bytes.push_back({"a", 400});
  EXPECT_THAT(make(dup_bytes, {}).message(), HasSubstr("duplicate token"));
  EXPECT_THAT(make(bytes, {{7, "<x>"}}).message(), HasSubstr("reuses BPE"));
  EXPECT_THAT(make(bytes, {{300, "<x>"}, {301, "<x>"}}).message(),
              HasSubstr("appears twice"));
  EXPECT_THAT(make(bytes, {{300, "<x>"}, {300, "<y>"}}).message(),
              HasSubstr("appears twice"));
  EXPECT_THAT(make(bytes, {{300, ""}}).message(), HasSubstr("empty"));
  EXPECT_THAT(make(bytes, {{1 << 24, "<x>"}}).message(),
              HasSubstr("out of range"));
}

}  // namespace
}  // namespace flotilla::tokenizer
