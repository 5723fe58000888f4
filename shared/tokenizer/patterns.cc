#include "shared/tokenizer/patterns.h"

#include "absl/strings/str_cat.h"

namespace flotilla::tokenizer {
namespace {

// Script=Han, Unicode 15.1 (docs/k3-architecture.md section 4). Ranges that
// PCRE2 10.42 (Unicode 14) does not know are harmless: those code points
// are unassigned (Cn) to PCRE2, so only the H branch can take them.
constexpr char kHanRanges[] =
    "\\x{2E80}-\\x{2E99}\\x{2E9B}-\\x{2EF3}\\x{2F00}-\\x{2FD5}\\x{3005}"
    "\\x{3007}\\x{3021}-\\x{3029}\\x{3038}-\\x{303B}\\x{3400}-\\x{4DBF}"
    "\\x{4E00}-\\x{9FFF}\\x{F900}-\\x{FA6D}\\x{FA70}-\\x{FAD9}"
    "\\x{16FE2}-\\x{16FE3}\\x{16FF0}-\\x{16FF1}\\x{20000}-\\x{2A6DF}"
    "\\x{2A700}-\\x{2B739}\\x{2B740}-\\x{2B81D}\\x{2B820}-\\x{2CEA1}"
    "\\x{2CEB0}-\\x{2EBE0}\\x{2EBF0}-\\x{2EE5D}\\x{2F800}-\\x{2FA1D}"
    "\\x{30000}-\\x{3134A}\\x{31350}-\\x{323AF}";

// White_Space (PropList.txt, unchanged since Unicode 6.3).
constexpr char kWhiteSpace[] =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}"
    "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// The general categories outside {Lu,Lt,Lm,Lo,M} and outside
// {Ll,Lm,Lo,M}: negating them (plus Han) yields the intersected classes.
constexpr char kNotUpperCategories[] = "\\p{Ll}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}";
constexpr char kNotLowerCategories[] =
    "\\p{Lu}\\p{Lt}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}";

constexpr char kContractions[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
constexpr char kNumbers[] = "\\p{N}{1,3}";

// D, E, F and G are shared by all three patterns except for D's trailing
// class, which o200k widens with '/'.
std::string PunctuationBranch(const char* trailing) {
  return absl::StrCat(" ?", PunctuationClass(), "+[", trailing, "]*");
}

std::string WhitespaceBranches() {
  const std::string ws = WhitespaceClass();
  return absl::StrCat(ws, "*[\\r\\n]+|", ws, "+(?![^", kWhiteSpace, "])|", ws,
                      "+");
}

// Branches A and B of o200k / Kimi, given the upper and lower classes.
std::string WordBranches(const std::string& upper, const std::string& lower) {
  const std::string prefix = WordPrefixClass();
  return absl::StrCat(prefix, "?", upper, "*", lower, "+", kContractions, "?|",
                      prefix, "?", upper, "+", lower, "*", kContractions, "?");
}

}  // namespace

std::string HanClass() { return absl::StrCat("[", kHanRanges, "]"); }

std::string WhitespaceClass() { return absl::StrCat("[", kWhiteSpace, "]"); }

std::string WhitespaceRanges() { return kWhiteSpace; }

std::string KimiUpperClass() {
  return absl::StrCat("[^", kHanRanges, kNotUpperCategories, "]");
}

std::string KimiLowerClass() {
  return absl::StrCat("[^", kHanRanges, kNotLowerCategories, "]");
}

std::string O200kUpperClass() { return "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"; }

std::string O200kLowerClass() { return "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"; }

std::string WordPrefixClass() { return "[^\\r\\n\\p{L}\\p{N}]"; }

std::string PunctuationClass() {
  return absl::StrCat("[^", kWhiteSpace, "\\p{L}\\p{N}]");
}

std::string KimiPattern() {
  return absl::StrCat(HanClass(), "+|",                                  // H
                      WordBranches(KimiUpperClass(), KimiLowerClass()),  // AB
                      "|", kNumbers,                                     // C
                      "|", PunctuationBranch("\\r\\n"),                  // D
                      "|", WhitespaceBranches());                        // EFG
}

std::string Cl100kPattern() {
  return absl::StrCat(kContractions, "|", WordPrefixClass(), "?\\p{L}+|",
                      kNumbers, "|", PunctuationBranch("\\r\\n"), "|",
                      WhitespaceBranches());
}

std::string O200kPattern() {
  return absl::StrCat(WordBranches(O200kUpperClass(), O200kLowerClass()), "|",
                      kNumbers, "|", PunctuationBranch("\\r\\n/"), "|",
                      WhitespaceBranches());
}

}  // namespace flotilla::tokenizer
