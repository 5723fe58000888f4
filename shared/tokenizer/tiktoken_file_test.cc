#include "shared/tokenizer/tiktoken_file.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flotilla::tokenizer {
namespace {

using ::testing::HasSubstr;

TEST(StrictBase64Test, DecodesCanonicalInput) {
  EXPECT_EQ(*StrictBase64Decode("IQ=="), "!");
  EXPECT_EQ(*StrictBase64Decode("aGk="), "hi");
  EXPECT_EQ(*StrictBase64Decode("aGV5"), "hey");
  EXPECT_EQ(*StrictBase64Decode("AP8="), std::string("\0\xff", 2));
  EXPECT_EQ(*StrictBase64Decode("+/+/"), "\xfb\xff\xbf");
}

TEST(StrictBase64Test, RejectsMalformedInput) {
  for (const char* bad : {"IQ=", "I===", "IQ==IQ==x",
                          "I Q=", "IQ-=", "IR==", "aGl=", "=QQQ", "IQ=Q"}) {
    EXPECT_FALSE(StrictBase64Decode(bad).ok()) << bad;
  }
}

TEST(ParseTiktokenModelTest, ParsesLines) {
  absl::StatusOr<std::vector<RankEntry>> entries =
      ParseTiktokenModel("IQ== 0\r\n\naGk= 7\naGV5 3", "m");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].bytes, "!");
  EXPECT_EQ((*entries)[1].bytes, "hi");
  EXPECT_EQ((*entries)[1].rank, 7);
  EXPECT_EQ((*entries)[2].rank, 3);
}

struct BadModelCase {
  const char* contents;
  const char* message;
};

class BadModelTest : public ::testing::TestWithParam<BadModelCase> {};

TEST_P(BadModelTest, NamesSourceAndLine) {
  absl::StatusOr<std::vector<RankEntry>> entries =
      ParseTiktokenModel(GetParam().contents, "/d/tiktoken.model");
  ASSERT_FALSE(entries.ok());
  EXPECT_EQ(entries.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(entries.status().message(), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadModelTest,
    ::testing::Values(
        BadModelCase{"IQ== 0\nIg== x1\n", "/d/tiktoken.model:2: bad rank"},
        BadModelCase{"IQ== 0\nIg== -1\n", ":2: bad rank '-1'"},
        BadModelCase{"IQ== 99999999999\n", ":1: bad rank"},
        BadModelCase{"IQ== 16777216\n", ":1: bad rank '16777216'"},
        BadModelCase{"IQ== 0\nI*== 1\n", ":2: invalid base64"},
        BadModelCase{"IQ== 0\nIQ 1\n", ":2: base64 length"},
        BadModelCase{"IQ==  0\n", ":1: expected 'base64 rank'"},
        BadModelCase{"IQ==\n", ":1: expected"},
        BadModelCase{"IQ== 0 extra\n", ":1: expected"},
        BadModelCase{"IQ== 0\nIg== 0\n",
                     ":2: duplicate rank 0 (first on line 1)"},
        BadModelCase{"IQ== 0\n\nIQ== 1\n", ":3: duplicate token IQ=="},
        BadModelCase{"= 0\n", ":1: base64 length"},
        BadModelCase{"\n\n", "/d/tiktoken.model: no tokens"}));

TEST(ParseAddedTokensTest, ParsesDecoderSortedById) {
  absl::StatusOr<std::vector<AddedToken>> tokens = ParseAddedTokens(
      R"({"added_tokens_decoder": {
            "163586": {"content": "<|open|>", "special": true},
            "163584": {"content": "[BOS]", "special": true, "lstrip": false},
            "163585": {"content": "plain"}},
          "chat_template": "ignored"})",
      "cfg");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->size(), 3u);
  EXPECT_EQ((*tokens)[0].id, 163584);
  EXPECT_EQ((*tokens)[0].content, "[BOS]");
  EXPECT_TRUE((*tokens)[0].special);
  EXPECT_EQ((*tokens)[1].content, "plain");
  EXPECT_FALSE((*tokens)[1].special);
  EXPECT_EQ((*tokens)[2].content, "<|open|>");
}

TEST(ParseAddedTokensTest, RejectsMalformedConfigs) {
  const std::pair<const char*, const char*> cases[] = {
      {"{", "/d/tokenizer_config.json: invalid JSON"},
      {"[]", "top level is not an object"},
      {"{}", "missing added_tokens_decoder"},
      {R"({"added_tokens_decoder": []})", "not an object"},
      {R"({"added_tokens_decoder": {"x": {"content": "a"}}})", "not a number"},
      {R"({"added_tokens_decoder": {"1": "a"}})", "not an object"},
      {R"({"added_tokens_decoder": {"1": {"content": 5}}})", "no string"},
      {R"({"added_tokens_decoder": {"1": {"content": ""}}})", "empty content"},
      {R"({"added_tokens_decoder": {"1": {"content": "a", "special": 1}}})",
       "special not bool"},
      {"{\"added_tokens_decoder\": {\"1\": {\"content\": \"\xff\"}}}",
       "invalid JSON"},
  };
  for (const auto& [json, message] : cases) {
    absl::StatusOr<std::vector<AddedToken>> tokens =
        ParseAddedTokens(json, "/d/tokenizer_config.json");
    ASSERT_FALSE(tokens.ok()) << json;
    EXPECT_THAT(tokens.status().message(), HasSubstr(message)) << json;
    EXPECT_THAT(tokens.status().message(),
                HasSubstr("/d/tokenizer_config.json"));
  }
}

TEST(ReadFileToStringTest, MissingFileIsNotFound) {
  absl::StatusOr<std::string> text = ReadFileToString("/nonexistent/x.model");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(text.status().message(), HasSubstr("/nonexistent/x.model"));
}

TEST(ReadFileToStringTest, DirectoryIsAnError) {
  EXPECT_FALSE(ReadFileToString("/").ok());
}

}  // namespace
}  // namespace flotilla::tokenizer
