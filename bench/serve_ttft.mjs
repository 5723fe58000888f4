// Time to first token of a conversation's second turn, with and without
// prefix reuse, through `flotilla-coordinator serve`. Turn 1 is a prompt of
// --first-tokens random token ids answered with --reply tokens; turn 2 sends
// turn 1's prompt, its reply and --new-tokens more ids (what a chat client
// sends for the next turn) as a streamed completion, and the time until
// its first token arrives is measured. Each --repeats round uses fresh
// prompts; the server runs once with --prefix-cache 0 and once with
// --cache SIZE. Prints medians and the ratio. With --cache-dir DIR it also
// runs turn 1 on a server keeping states in DIR (--prefix-cache-dir, no
// memory cache), stops it, and runs turn 2 on a fresh server over the same
// folder: the second turn's TTFT after a restart.
//
//   node bench/serve_ttft.mjs --binary build/bin/flotilla-coordinator \
//     --model DIR [--mem 1G] [--cache 256M] [--first-tokens 500]
//     [--reply 16] [--new-tokens 20] [--repeats 3] [--vocab 32768]
//     [--cache-dir DIR]
import { startServer } from "../tests/web/server.mjs";

const args = Object.fromEntries(
    process.argv.slice(2).reduce((acc, a, i, all) =>
        a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc, []));
if (!args.binary || !args.model) {
  console.error("usage: serve_ttft.mjs --binary BIN --model DIR [--mem SIZE] ...");
  process.exit(2);
}
const firstTokens = Number(args["first-tokens"] || 500);
const reply = Number(args.reply || 16);
const newTokens = Number(args["new-tokens"] || 20);
const repeats = Number(args.repeats || 3);
const vocab = Number(args.vocab || 32768);
let state = 7;
const randomId = () => {
  state = (state * 1664525 + 1013904223) >>> 0;
  return 3 + (state % (vocab - 3));  // clear of the usual special ids
};

function start(cache, extra = []) {
  return startServer(args.binary, [
    "--model", args.model, "--mem", args.mem || "1G", "--max-batch", "1",
    "--max-context", String(firstTokens + reply + newTokens + 64),
    "--prefix-cache", cache, "--threads", args.threads || "2", ...extra,
  ], { timeoutMs: 600000 });
}

// Streams a completion of `ids`; resolves to [seconds to the first token,
// the generated ids] (ids read from logprobs, "token_id:N" or text).
async function complete(url, ids, maxTokens) {
  const t0 = performance.now();
  const r = await fetch(url + "/v1/completions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt: ids, max_tokens: maxTokens, temperature: 0,
                           logprobs: 0, return_tokens_as_token_ids: true,
                           stream: true }),
  });
  if (r.status !== 200) throw new Error(`status ${r.status}: ${await r.text()}`);
  let first = 0, buffer = "";
  const out = [];
  for await (const piece of r.body) {
    buffer += Buffer.from(piece).toString();
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const data = buffer.slice(6, end);
      buffer = buffer.slice(end + 2);
      if (data === "[DONE]") continue;
      const chunk = JSON.parse(data);
      const lp = chunk.choices[0] && chunk.choices[0].logprobs;
      if (lp && lp.tokens.length) {
        if (!first) first = performance.now();
        for (const t of lp.tokens) out.push(Number(t.slice(t.indexOf(":") + 1)));
      }
    }
  }
  return [(first - t0) / 1000, out];
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results = {};
const rounds = Array.from({ length: repeats }, () => ({
  first: Array.from({ length: firstTokens }, randomId),
  next: Array.from({ length: newTokens }, randomId),
}));
for (const cache of ["0", args.cache || "256M"]) {
  const server = await start(cache);
  const url = server.url;
  const ttft = [], firstTtft = [], replies = [];
  for (const round of rounds) {
    const [t1, ids] = await complete(url, round.first, reply);
    firstTtft.push(t1);
    const turn2 = [...round.first, ...ids, ...round.next];
    const [t2, ids2] = await complete(url, turn2, 4);
    ttft.push(t2);
    replies.push(ids2.join(","));
  }
  await server.stop();
  results[cache] = { turn1_ttft_s: firstTtft, turn2_ttft_s: ttft,
                     turn2_median_s: median(ttft), replies };
  console.log(`prefix cache ${cache}: turn 1 TTFT ${firstTtft.map((t) => t.toFixed(2)).join(" ")} s; ` +
              `turn 2 TTFT ${ttft.map((t) => t.toFixed(2)).join(" ")} s (median ${median(ttft).toFixed(2)})`);
}
const [off, on] = Object.values(results);
let same = off.replies.every((r, i) => r === on.replies[i]);
if (args["cache-dir"]) {
  const { rmSync } = await import("node:fs");
  rmSync(args["cache-dir"], { recursive: true, force: true });
  const disk = ["--prefix-cache-dir", args["cache-dir"]];
  let server = await start("0", disk);
  const turn2s = [];
  for (const round of rounds) {
    const [, ids] = await complete(server.url, round.first, reply);
    turn2s.push([...round.first, ...ids, ...round.next]);
  }
  await server.stop();
  server = await start("0", disk);  // the restart
  const ttft = [], replies = [];
  for (const turn2 of turn2s) {
    const [t2, ids2] = await complete(server.url, turn2, 4);
    ttft.push(t2);
    replies.push(ids2.join(","));
  }
  await server.stop();
  const identical = replies.every((r, i) => r === off.replies[i]);
  same = same && identical;
  console.log(`prefix cache on disk, after a restart: turn 2 TTFT ` +
              `${ttft.map((t) => t.toFixed(2)).join(" ")} s (median ${median(ttft).toFixed(2)}, ` +
              `${(off.turn2_median_s / median(ttft)).toFixed(1)}x faster than without); ` +
              `replies identical: ${identical}`);
}
console.log(`second-turn TTFT: ${off.turn2_median_s.toFixed(2)} s without reuse, ` +
            `${on.turn2_median_s.toFixed(2)} s with (${(off.turn2_median_s / on.turn2_median_s).toFixed(1)}x); ` +
            `replies identical: ${same}`);
process.exit(same ? 0 : 1);
