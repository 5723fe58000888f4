// Golden ids for the tokenizer.json implementation (shared/tokenizer/hf_*),
// from Tokenizers.js (npm @huggingface/tokenizers), an implementation
// independent of ours.
//
// Usage: node gen_hf_golden.mjs NODE_MODULES CORPUS OUT_DIR NAME=MODEL_DIR...
//
// For each NAME=MODEL_DIR (a folder holding tokenizer.json and
// tokenizer_config.json) writes OUT_DIR/golden_hf_NAME.json: for every string
// of corpus.plain (by index) and of the per-tokenizer extras (inline: text
// built around its added tokens, whitespace runs, digits), the ids of
// encode(text) with the default add_special_tokens, and decode(ids,
// skip_special_tokens) when it differs from the text.
import fs from "fs";
import path from "path";
import { createRequire } from "module";

const [nodeModules, corpusPath, outDir, ...models] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(nodeModules), "_.js"));
const { Tokenizer } = require("@huggingface/tokenizers");
const pkg = JSON.parse(fs.readFileSync(
    path.join(nodeModules, "@huggingface/tokenizers/package.json"), "utf8"));
const corpus = JSON.parse(fs.readFileSync(corpusPath, "utf8"));

// Deterministic pseudo-random numbers (xorshift32): reruns give the same
// files.
let seed = 0x2545f491;
function rand(n) {
  seed ^= seed << 13; seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5; seed >>>= 0;
  return seed % n;
}

// Strings around the tokenizer's own added tokens, plus whitespace and digit
// runs that the shared corpus has few of.
function extras(tokenizerJson) {
  const added = tokenizerJson.added_tokens.map((t) => t.content);
  const out = [];
  const words = ["Hello", " world", "x", "  ", "\n", "数字", "é", "🙂", "12345"];
  for (let i = 0; i < 200 && added.length > 0; i++) {
    let s = "";
    const parts = 1 + rand(5);
    for (let p = 0; p < parts; p++) {
      s += rand(2) ? added[rand(added.length)] : words[rand(words.length)];
    }
    out.push(s);
  }
  for (const t of added.slice(0, 16)) {
    out.push(t, ` ${t} `, `a${t}b`, `${t}${t}`, t.slice(0, -1));
  }
  const spaces = [" ", "  ", "\t", "\n", "\r\n", "\u3000", "\u00a0"];
  for (let i = 0; i < 100; i++) {
    let s = "";
    const n = 1 + rand(12);
    for (let k = 0; k < n; k++) s += spaces[rand(spaces.length)];
    out.push(rand(2) ? s : `word${s}word`);
  }
  for (let i = 0; i < 100; i++) {
    let s = "";
    const n = 1 + rand(14);
    for (let k = 0; k < n; k++) s += String(rand(10));
    out.push(rand(3) === 0 ? `${s}.${rand(1000)}` : s);
  }
  out.push("", " ", "Once upon a time", "  leading", "trailing  ");
  return out;
}

for (const spec of models) {
  const [name, dir] = spec.split("=");
  // Each vocabulary's extras from the same start, so a file does not depend
  // on which vocabularies were generated before it.
  seed = 0x2545f491;
  const tj = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const tc = JSON.parse(
      fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
  const tok = new Tokenizer(tj, tc);
  const cases = [];
  const add = (c, text) => {
    const ids = tok.encode(text).ids;
    const decoded =
        ids.length ? tok.decode(ids, { skip_special_tokens: true }) : "";
    if (decoded !== text) c.decoded = decoded;
    c.ids = ids;
    cases.push(c);
  };
  corpus.plain.forEach((text, i) => add({ plain: i }, text));
  for (const text of extras(tj)) add({ text }, text);
  const head = {
    comment: `ids of Tokenizers.js encode() (default add_special_tokens) for ` +
        `corpus.json plain[i] or text; decoded = decode(ids, ` +
        `skip_special_tokens) where it differs from the text`,
    generator: `@huggingface/tokenizers ${pkg.version}, node ${process.version}`,
    tokenizer: name,
  };
  const body = cases.map((c) => JSON.stringify(c)).join(",\n");
  const json = JSON.stringify(head).slice(0, -1) + `,"cases":[\n${body}\n]}\n`;
  fs.writeFileSync(path.join(outDir, `golden_hf_${name}.json`), json);
  const lossy = cases.filter((c) => c.decoded !== undefined).length;
  console.log(`${name}: ${cases.length} cases, ${lossy} decode differently`);
}
