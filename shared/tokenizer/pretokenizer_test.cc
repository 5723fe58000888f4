#include "shared/tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/tokenizer/patterns.h"
#include "shared/tokenizer/testdata_util.h"

namespace flotilla::tokenizer {
namespace {

using ::testing::ElementsAre;
using testing::LoadJson;
using testing::Quote;

std::vector<std::string> SplitKimi(absl::string_view text) {
  absl::StatusOr<std::unique_ptr<Pretokenizer>> pre = Pretokenizer::Kimi();
  std::vector<std::string> out;
  if (!pre.ok()) {
    ADD_FAILURE() << pre.status();
    return out;
  }
  for (absl::string_view p : (*pre)->Split(text)) out.emplace_back(p);
  return out;
}

TEST(PretokenizerTest, AllPatternsCompile) {
  EXPECT_TRUE(Pretokenizer::Kimi().ok());
  EXPECT_TRUE(Pretokenizer::Cl100k().ok());
  EXPECT_TRUE(Pretokenizer::O200k().ok());
  absl::StatusOr<std::unique_ptr<Pretokenizer>> bad = Pretokenizer::Create("(");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("offset 1"));
}

TEST(PretokenizerTest, KimiBranches) {
  // H: Han runs only; 。 is Script=Common (Han only by Script_Extensions,
  // which a bare PCRE2 \p{Han} would use), so it splits the run.
  EXPECT_THAT(SplitKimi("\xe4\xbd\xa0\xe5\xa5\xbd\xe3\x80\x82\xe4\xb8\x96ok"),
              ElementsAre("\xe4\xbd\xa0\xe5\xa5\xbd", "\xe3\x80\x82",
                          "\xe4\xb8\x96", "ok"));
  // A/B with contractions, C digit groups, D punctuation, E/F/G spaces.
  EXPECT_THAT(SplitKimi("I'M don't HTTPServer 12345!!\n\n  x  "),
              ElementsAre("I'M", " don't", " HTTPServer", " ", "123", "45",
                          "!!\n\n", " ", " x", "  "));
  // Han is excluded from the A/B classes, so Kana and Han split apart.
  EXPECT_THAT(SplitKimi("\xe6\x97\xa5\xe6\x9c\xac\xe3\x81\xae"),
              ElementsAre("\xe6\x97\xa5\xe6\x9c\xac", "\xe3\x81\xae"));
  EXPECT_THAT(SplitKimi(""), ElementsAre());
}

TEST(PretokenizerTest, InvalidUtf8BecomesGapPieces) {
  const std::string text = "ab\xff\xfe cd\xe4\xb8 e\xed\xa0\x80";
  std::vector<std::string> pieces = SplitKimi(text);
  EXPECT_EQ(absl::StrJoin(pieces, ""), text);
  EXPECT_THAT(pieces, ElementsAre("ab", "\xff\xfe", " cd", "\xe4\xb8", " e",
                                  "\xed\xa0\x80"));
}

// Each match must cost time proportional to its own length, not the whole
// subject's (e.g. no per-call UTF-8 validation of the full text).
TEST(PretokenizerTest, LongTextSplitsInLinearTime) {
  std::string text;
  while (text.size() < (8 << 20)) {
    text += "The quick brown fox, \xe4\xbd\xa0\xe5\xa5\xbd 42!\n";
  }
  absl::StatusOr<std::unique_ptr<Pretokenizer>> pre = Pretokenizer::Kimi();
  ASSERT_TRUE(pre.ok());
  size_t pieces = 0, bytes = 0;
  (*pre)->Split(text, [&](absl::string_view p) {
    ++pieces;
    bytes += p.size();
  });
  EXPECT_EQ(bytes, text.size());
  EXPECT_GT(pieces, 1000000u);
}

TEST(PretokenizerTest, HugeInputsDoNotOverflowTheJitStack) {
  for (const std::string& text :
       {std::string(1 << 20, 'a'), std::string(1 << 20, ' '),
        std::string(1 << 20, '!'), std::string(1 << 19, 'A') + "b",
        absl::StrCat(std::string(1 << 20, ' '), "\n", std::string(9, ' '))}) {
    const std::vector<std::string> pieces = SplitKimi(text);
    EXPECT_EQ(absl::StrJoin(pieces, ""), text);
    EXPECT_LE(pieces.size(), 3u);
  }
}

// Golden splits from Python `regex` (V1) running the reference pattern.
TEST(PretokenizerTest, KimiMatchesPythonRegexGolden) {
  const nlohmann::json corpus = LoadJson("corpus.json");
  const nlohmann::json golden = LoadJson("kimi_splits.json");
  ASSERT_FALSE(corpus.is_discarded() || golden.is_discarded());
  const auto& texts = corpus["plain"];
  const auto& splits = golden["splits"];
  ASSERT_EQ(texts.size(), splits.size());
  absl::StatusOr<std::unique_ptr<Pretokenizer>> pre = Pretokenizer::Kimi();
  ASSERT_TRUE(pre.ok());
  int passed = 0, failed = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    std::vector<size_t> got;
    for (absl::string_view p : (*pre)->Split(text)) got.push_back(p.size());
    const auto want = splits[i].get<std::vector<size_t>>();
    if (got == want) {
      ++passed;
    } else if (++failed <= 10) {
      ADD_FAILURE() << "case " << i << " " << Quote(text) << "\n got lengths "
                    << absl::StrJoin(got, ",") << "\nwant lengths "
                    << absl::StrJoin(want, ",");
    }
  }
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(passed, static_cast<int>(texts.size()));
  RecordProperty("compared", passed + failed);
  std::printf("Kimi splits: %d/%zu match Python regex\n", passed, texts.size());
}

std::string Utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Membership of every scalar value in `klass` according to PCRE2, found by
// running `klass+` over one string holding all scalar values in order.
std::vector<bool> PcreMembers(const std::string& klass) {
  static const auto* const kAll = [] {
    auto* all = new std::pair<std::string, std::vector<uint32_t>>();
    for (uint32_t cp = 0; cp < 0x110000; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      const std::string bytes = Utf8(cp);
      all->first += bytes;
      all->second.insert(all->second.end(), bytes.size(), cp);  // Byte -> cp.
    }
    return all;
  }();
  const std::string& text = kAll->first;
  std::vector<bool> members(0x110000, false);
  const std::string pattern = klass + "+";
  int err;
  PCRE2_SIZE off;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                    pattern.size(), PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  EXPECT_NE(code, nullptr) << pattern;
  if (code == nullptr) return members;
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  size_t pos = 0;
  // NO_UTF_CHECK: otherwise every call re-validates all 4 MB of subject.
  while (pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()),
                     text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr) > 0) {
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    for (size_t b = ov[0]; b < ov[1]; ++b) members[kAll->second[b]] = true;
    pos = ov[1];
  }
  pcre2_match_data_free(md);
  pcre2_code_free(code);
  return members;
}

// Every class of the translated patterns equals Python `regex`'s class on
// each code point both libraries consider assigned. Code points assigned
// only in regex's newer Unicode are counted and printed, not compared.
TEST(PretokenizerTest, ClassesMatchPythonRegexOnJointlyAssignedCodePoints) {
  const nlohmann::json golden = LoadJson("unicode_classes.json");
  ASSERT_FALSE(golden.is_discarded());
  auto python_members = [&](const std::string& name) {
    std::vector<bool> m(0x110000, false);
    for (const auto& r : golden["ranges"][name]) {
      for (uint32_t cp = r[0]; cp <= r[1].get<uint32_t>(); ++cp) m[cp] = true;
    }
    return m;
  };
  const std::vector<bool> py_assigned = python_members("assigned");
  const std::vector<bool> pcre_assigned = PcreMembers("\\P{Cn}");
  int only_python = 0, only_pcre = 0;
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    only_python += py_assigned[cp] && !pcre_assigned[cp];
    only_pcre += pcre_assigned[cp] && !py_assigned[cp];
  }
  EXPECT_EQ(only_pcre, 0);
  std::printf("code points assigned only in Python regex's Unicode: %d\n",
              only_python);

  const std::pair<const char*, std::string> classes[] = {
      {"han", HanClass()},
      {"kimi_upper", KimiUpperClass()},
      {"kimi_lower", KimiLowerClass()},
      {"o200k_upper", O200kUpperClass()},
      {"o200k_lower", O200kLowerClass()},
      {"prefix", WordPrefixClass()},
      {"letter", "\\p{L}"},
      {"number", "\\p{N}"},
      {"punct", PunctuationClass()},
      {"space", WhitespaceClass()},
  };
  for (const auto& [name, klass] : classes) {
    const std::vector<bool> py = python_members(name);
    const std::vector<bool> pcre = PcreMembers(klass);
    int mismatches = 0;
    for (uint32_t cp = 0; cp < 0x110000; ++cp) {
      if (!py_assigned[cp] || !pcre_assigned[cp] || py[cp] == pcre[cp]) {
        continue;
      }
      if (++mismatches <= 5) {
        ADD_FAILURE() << name << ": U+" << std::hex << cp
                      << " python=" << py[cp] << " pcre2=" << pcre[cp];
      }
    }
    EXPECT_EQ(mismatches, 0) << name;
  }
}

}  // namespace
}  // namespace flotilla::tokenizer
