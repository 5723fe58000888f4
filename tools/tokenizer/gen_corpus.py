#!/usr/bin/python3
"""Writes the tokenizer test corpus: shared/tokenizer/testdata/corpus.json.

The corpus feeds every golden file (tiktoken ids, Kimi pre-token splits), so
the C++ tests and the reference implementations see identical strings.

Unicode versions differ between the references and PCRE2: PCRE2 10.42 knows
Unicode 14, Python `regex` 2022.10.31 knows Unicode 15.0, and tiktoken's
Rust regex carries its own (newer) tables. Random code points are therefore
drawn only from characters that this interpreter's `unicodedata` (Unicode
14.0, asserted below) says are assigned, which every reference knows. Hand-written
fragments stay within Unicode 14 too (checked at the end).

Deterministic: fixed seed; run with /usr/bin/python3 (Debian, Python 3.11).
"""
import json
import random
import sys
import unicodedata

assert unicodedata.unidata_version == "14.0.0", unicodedata.unidata_version

rng = random.Random(20240611)

WORDS = ("the of and to in is you that it he was for on are as with his they "
         "at be this have from or one had by word but not what all were we "
         "when your can said there use an each which she do how their if will "
         "up other about out many then them these so some her would make like "
         "him into time has look two more write go see number no way could "
         "people my than first water been call who oil its now find long down "
         "day did get come made may part tokenizer inference engine expert "
         "mixture routing latency throughput kernel tensor quantization").split()
CONTRACTIONS = ["don't", "I'm", "they're", "we've", "she'll", "he'd", "it's",
                "DON'T", "I'M", "THEY'RE", "We'Ve", "SHE'LL", "Bob's", "cats'",
                "'s", "'S", "'t", "'ll", "'LL", "'Re", "'vE", "'d", "'m",
                "'x", "''s", "' s", "rock'n'roll", "y'all'd've", "it\u2019s",
                "'\u017f", "O'Neil", "'123", "'\u00e9t\u00e9", "'\u4e2d"]
CODE = [
    "#include <vector>", "int main(int argc, char** argv) {", "  return 0;",
    "}", "for (size_t i = 0; i < n; ++i) x[i] += y[i];",
    "def foo(bar, *args, **kwargs):", "    return [x**2 for x in range(10)]",
    "if (a != b && c === d) { console.log(`${a}`); }", "// TODO(jdoe): fix",
    "/* block comment */", "std::unique_ptr<Tokenizer> tok;", "x->y = &z;",
    "SELECT id, name FROM users WHERE age >= 21;", "<div class=\"a\">hi</div>",
    "{\"key\": [1, 2.5, -3e-9, true, null]}", "let s = 'it''s';",
    "fn main() -> Result<(), Box<dyn Error>> {", "\tif err != nil {",
    "http://example.com/path/to?q=1&x=y#frag", "C:\\Windows\\System32",
    "/usr/local/bin/python3 -m pip", "0xDEADBEEF 0b1010 1_000_000 3.14159",
    "a+=1;b-=2;c*=3;d/=4;e%=5", "@decorator\nclass Foo(Base):",
    "$ echo \"$HOME\" | grep -v '^#'", "snake_case camelCase PascalCase "
    "SCREAMING_CASE kebab-case", "i18n l10n a11y k8s",
]
SENTENCES = [
    "\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed"
    "\u5427\u3002",
    "\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002",
    "\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a\u3001\u4eba\u3005"
    "\u30fc\u30c6\u30b9\u30c8",
    "\ud55c\uad6d\uc5b4 \ubb38\uc7a5\uc785\ub2c8\ub2e4. \uc548\ub155\ud558"
    "\uc138\uc694!",
    "\u0645\u0631\u062d\u0628\u064b\u0627 \u0628\u0627\u0644\u0639\u064e\u0627"
    "\u0644\u064e\u0645\u0650 \u0661\u0662\u0663",
    "\u05e9\u05b8\u05c1\u05dc\u05d5\u05b9\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f"
    "\u093e \u0967\u0968\u0969",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0401\u0416"
    "\u0418\u041a",
    "\u0391\u0392\u0393 \u03b1\u03b2\u03b3 \u1f88\u1f00 \u01c5\u01c8\u01cb"
    "\u01f2",
    "Stra\u00dfe \u00c9cole na\u00efve fa\u00e7ade \u0130stanbul \u0131",
    "\u02b0\u02b1 \u1d2c\u1d2e \u3005\u303b \u3007\u3021\u3029 \u2e80\u2f00",
    "\uff21\uff22\uff23\uff41\uff42\uff43\uff10\uff11\uff12\uff01",
]
# Emoji: plain, skin tones (Sk), ZWJ families, flags, keycaps (Me), tags.
EMOJI = [
    "\U0001F600", "\U0001F44D\U0001F3FD", "\u2764\ufe0f",
    "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466",
    "\U0001F469\U0001F3FE\u200d\U0001F4BB", "\U0001F1FA\U0001F1F8",
    "\U0001F1EF\U0001F1F5\U0001F1E8\U0001F1F3", "1\ufe0f\u20e3", "#\u20e3",
    "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F",
    "\U0001F3F3\ufe0f\u200d\U0001F308", "\u263a", "\U0001F9D1\u200d\U0001F91D"
    "\u200d\U0001F9D1",
]
SPACES = [" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", "\r\n\r\n",
          " \n ", "\t\t\n", "\u3000", "\u00a0", "\u2028", "\u2029", "\u0085",
          "\x0b", "\x0c", "\u180e", "\u200b", "\ufeff", "\x1c", "\x1f",
          "\u2003\u2009", "\u202f", "\u205f", "\u1680"]
DIGITS = ["0", "7", "42", "123", "1234", "12345678901234567890",
          "1,234,567.89", "3.14", "-5", "1e10", "\u00b2\u00b3",
          "\u00bd\u00be", "\u2160\u216b", "\u2460\u2461", "\uff11\uff12",
          "\u0661\u0662\u0663", "\u0967\u0968", "\U0001D7CE\U0001D7CF",
          "\u3007\u3021", "2024-06-11", "12:30:45"]
PUNCT = ["!", "!!!", "...", "?!?!", "---", "===", "***", "\u201c\u201d",
         "\u2018\u2019", "\u00ab\u00bb", "\"'", "'", "''", "'''", "' '",
         "/", "//", " / ", "/*", "\u3002", "\u3001", "\u300c\u300d",
         "\uff08\uff09", "\u2026", "\u2014", "$", "\u20ac100", "\u00a9",
         "@#", "^_^", "<|", "|>", "<|im_start|>", "[INST]", "\\n"]


def assigned14(cp):
    """True when Unicode 14 assigns cp and it is not a surrogate."""
    if 0xD800 <= cp <= 0xDFFF:
        return False
    return unicodedata.category(chr(cp)) != "Cn"


# Weighted planes: most text is BMP; supplementary planes hold emoji,
# CJK extensions, historic scripts and tags.
PLANE_RANGES = [(0x20, 0x2FF, 4), (0x300, 0x36F, 2), (0x370, 0x1FFF, 6),
                (0x2000, 0x2BFF, 3), (0x2E80, 0x9FFF, 4), (0xA000, 0xFFFD, 3),
                (0x10000, 0x1FFFF, 4), (0x20000, 0x323AF, 2),
                (0xE0000, 0xE01EF, 1), (0xF0000, 0xF00FF, 1)]
_TOTAL_W = sum(w for _, _, w in PLANE_RANGES)


def random_char():
    while True:
        x = rng.randrange(_TOTAL_W)
        for lo, hi, w in PLANE_RANGES:
            if x < w:
                break
            x -= w
        cp = rng.randint(lo, hi)
        if assigned14(cp):
            return chr(cp)


def random_from(lo, hi):
    while True:
        cp = rng.randint(lo, hi)
        if assigned14(cp):
            return chr(cp)


def script_run():
    lo, hi = rng.choice([(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x3041, 0x3096),
                         (0x30A1, 0x30FA), (0xAC00, 0xD7A3), (0x0621, 0x064A),
                         (0x0915, 0x0939), (0x0E01, 0x0E3A), (0x0400, 0x04FF),
                         (0x0370, 0x03FF), (0x20000, 0x2A6DF), (0xFF66, 0xFF9D),
                         (0x1100, 0x11FF), (0x0300, 0x036F), (0x10A0, 0x10FF)])
    return "".join(random_from(lo, hi) for _ in range(rng.randint(1, 8)))


def with_marks(s):
    out = []
    for ch in s:
        out.append(ch)
        for _ in range(rng.choice([0, 0, 0, 1, 2, 4])):
            out.append(random_from(0x300, 0x36F))
    return "".join(out)


def english():
    ws = [rng.choice(WORDS) for _ in range(rng.randint(1, 12))]
    form = rng.random()
    if form < 0.2:
        ws = [w.capitalize() for w in ws]
    elif form < 0.3:
        ws = [w.upper() for w in ws]
    return " ".join(ws) + rng.choice(["", ".", "!", "?", ",", ":"])


FRAGMENTS = [
    (english, 8), (lambda: rng.choice(CONTRACTIONS), 4),
    (lambda: rng.choice(CODE), 5), (lambda: rng.choice(SENTENCES), 5),
    (lambda: rng.choice(EMOJI), 3), (lambda: rng.choice(SPACES), 6),
    (lambda: rng.choice(DIGITS), 4), (lambda: rng.choice(PUNCT), 4),
    (script_run, 5), (lambda: with_marks(rng.choice(WORDS)), 2),
    (lambda: "".join(random_char() for _ in range(rng.randint(1, 6))), 6),
    (lambda: " " * rng.randint(2, 40), 1),
    (lambda: "".join(rng.choice(" \t\r\n\u3000") for _ in
                     range(rng.randint(2, 30))), 2),
]
_FRAG_W = sum(w for _, w in FRAGMENTS)


def fragment():
    x = rng.randrange(_FRAG_W)
    for fn, w in FRAGMENTS:
        if x < w:
            return fn()
        x -= w


def mixed(n):
    seps = ["", "", " ", " ", "\n", "\t", "\r\n"]
    return "".join(fragment() + rng.choice(seps) for _ in range(n))


def build_plain():
    out = []
    out += SENTENCES + EMOJI + CODE + CONTRACTIONS + SPACES + DIGITS + PUNCT
    out += ["", "a", " ", "\n", "'", "A", "\u4e00", "Hello, world!",
            "  leading and trailing  ", "x" * 3000, "\u4e2d" * 500,
            "ab" * 1000, " " * 1000 + "x", "\n" * 100, "1" * 1000,
            "A" * 500 + "a", "\u00e9" * 300, "\U0001F600" * 200]
    for _ in range(1200):
        out.append(fragment())
    for _ in range(2300):
        out.append(mixed(rng.randint(2, 12)))
    for _ in range(300):
        out.append("".join(random_char() for _ in range(rng.randint(1, 60))))
    for _ in range(20):
        out.append(mixed(rng.randint(60, 150)))
    return out


MARKERS = ["[BOS]", "<|open|>", "<|sep|>", "<|close|>", "<|end_of_msg|>"]


def build_with_markers(n):
    """Chat-like strings with Kimi markers at arbitrary positions."""
    out = ["[BOS]<|open|>user<|sep|>Hello<|close|><|open|>assistant<|sep|>",
           "<|open|>think<|sep|>", "x<|end_of_msg|>y", "<|open|<|open|>>",
           "[BOS][BOS]", "<|sep|", "[BOS"]
    while len(out) < n:
        parts = []
        for _ in range(rng.randint(1, 8)):
            parts.append(rng.choice([fragment(), rng.choice(MARKERS)]))
        out.append("".join(parts))
    return out


def main():
    plain = build_plain()
    marked = build_with_markers(800)
    for s in plain + marked:
        for ch in s:
            assert assigned14(ord(ch)), hex(ord(ch))
    corpus = {
        "comment": "Generated by tools/tokenizer/gen_corpus.py; do not edit.",
        "unicode_version": unicodedata.unidata_version,
        "plain": plain,
        "with_markers": marked,
        "markers": MARKERS,
    }
    path = sys.argv[1]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(corpus, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"{path}: {len(plain)} plain, {len(marked)} with markers")


if __name__ == "__main__":
    main()
