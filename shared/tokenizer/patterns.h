// Pre-tokenizer split patterns, translated by hand into PCRE2 syntax.
//
// The reference patterns are written for fancy-regex / Python `regex`. Three
// things do not carry over to PCRE2 10.42 verbatim:
//  * `&&` class intersection does not exist. [X&&[^\p{Han}]] is written as a
//    negated class of everything outside X plus Han, using the fact that the
//    general categories partition the code space (L = Lu Ll Lt Lm Lo, then
//    M N P S Z C, with C including unassigned Cn).
//  * PCRE2 >= 10.40 gives a bare \p{Han} Script_Extensions semantics, which
//    adds CJK punctuation such as U+3001 and U+3002; the references mean
//    Script=Han. Han is spelled out as explicit ranges (the Script=Han list
//    in docs/k3-architecture.md section 4), which also keeps it independent of
//    PCRE2's Unicode version.
//  * PCRE2's \s with UCP also matches U+180E; the references use the
//    Unicode White_Space property. \s is spelled out as that property.
// pretokenizer_test.cc checks every class below against Python `regex` on
// each code point both libraries consider assigned.
#ifndef FLOTILLA_SHARED_TOKENIZER_PATTERNS_H_
#define FLOTILLA_SHARED_TOKENIZER_PATTERNS_H_

#include <string>

namespace flotilla::tokenizer {

// Single-character classes in PCRE2 syntax, each a complete [...] item.
std::string HanClass();          // \p{Han} (Script=Han)
std::string WhitespaceClass();   // \s (White_Space)
std::string WhitespaceRanges();  // the members of WhitespaceClass, no brackets
std::string KimiUpperClass();    // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]
std::string KimiLowerClass();    // [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]
std::string O200kUpperClass();   // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
std::string O200kLowerClass();   // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
std::string WordPrefixClass();   // [^\r\n\p{L}\p{N}]
std::string PunctuationClass();  // [^\s\p{L}\p{N}]

// Kimi K3: H|A|B|C|D|E|F|G from docs/k3-architecture.md section 4.
std::string KimiPattern();
// pat_str of npm tiktoken 1.0.22's cl100k_base (no possessive quantifiers).
std::string Cl100kPattern();
// pat_str of npm tiktoken 1.0.22's o200k_base.
std::string O200kPattern();

}  // namespace flotilla::tokenizer

#endif  // FLOTILLA_SHARED_TOKENIZER_PATTERNS_H_
