// Bounded soak of `flotilla-coordinator serve` on loopback: concurrent
// clients send a random mix for --seconds (streamed and whole completions
// and chats, clients that hang up mid-stream, malformed or out-of-range
// requests, health and model queries) while the server's RSS is sampled
// every second. Every request that was not deliberately abandoned must get
// a complete answer: a finished stream ([DONE] after a finish_reason), a
// whole response with choices, 429 when the queue is full, or the 4xx its
// bad input deserves. Prints the counts, the RSS over time (after a
// warm-up) and exits 1 if any response was lost or the server died.
//
//   node bench/serve_soak.mjs --binary build/bin/flotilla-coordinator \
//     --model models/stories260k-moe [--seconds 300] [--clients 12]
//     [--max-queue 8] [--max-batch 8] [--prefix-cache 64M] [--seed 1]
// The prefix cache keeps ended requests' states up to its size by design,
// so RSS first grows by about that much; it must then stay flat.
import { readFileSync } from "node:fs";
import { startServer } from "../tests/web/server.mjs";

const args = Object.fromEntries(
    process.argv.slice(2).reduce((acc, a, i, all) =>
        a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc, []));
const seconds = Number(args.seconds || 300);
const clients = Number(args.clients || 12);
if (!args.binary || !args.model) {
  console.error("usage: serve_soak.mjs --binary BIN --model DIR [--seconds S] [--clients N]");
  process.exit(2);
}
// A small deterministic generator, so a failing mix can be replayed.
let state = Number(args.seed || 1) >>> 0;
const random = () => {
  state = (state * 1664525 + 1013904223) >>> 0;
  return state / 2 ** 32;
};
const pick = (xs) => xs[Math.floor(random() * xs.length)];

const server = await startServer(args.binary, [
  "--model", args.model,
  "--max-queue", args["max-queue"] || "8", "--max-batch", args["max-batch"] || "8",
  "--prefix-cache", args["prefix-cache"] || "64M",
]);
const url = server.url;

function rssMb() {
  const m = readFileSync(`/proc/${server.pid}/status`, "utf8").match(/VmRSS:\s+(\d+) kB/);
  return m ? Number(m[1]) / 1024 : NaN;
}

const counts = {};
const count = (k) => { counts[k] = (counts[k] || 0) + 1; };
const lost = [];
const prompts = ["Once upon a time", "The little dog", "Lily and Ben", "One day",
                 "Tom had a red ball", "The sun was hot", "A big cat", "Sue liked"];

async function streamed(path, body, abandonAfterMs) {
  const controller = new AbortController();
  const r = await fetch(url + path, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }), signal: controller.signal,
  });
  if (r.status === 429) return count("429 queue full");
  if (r.status !== 200) throw new Error(`stream status ${r.status}: ${await r.text()}`);
  if (abandonAfterMs >= 0) setTimeout(() => controller.abort(), abandonAfterMs);
  let text = "";
  try {
    for await (const piece of r.body) text += Buffer.from(piece).toString();
  } catch (e) {
    if (e.name === "AbortError" || controller.signal.aborted) return count("abandoned mid-stream");
    throw e;
  }
  if (!text.includes("data: [DONE]") || !/"finish_reason":"(stop|length)"/.test(text)) {
    if (controller.signal.aborted) return count("abandoned mid-stream");
    throw new Error("incomplete stream: " + text.slice(-200));
  }
  count("streamed complete");
}

async function whole(path, body) {
  const r = await fetch(url + path, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  if (r.status === 429) return count("429 queue full");
  const j = await r.json();
  if (r.status !== 200 || !j.choices || !j.choices[0].finish_reason) {
    throw new Error(`whole status ${r.status}: ${JSON.stringify(j).slice(0, 200)}`);
  }
  count("whole complete");
}

async function bad() {
  const cases = [
    ["{not json", 400], [JSON.stringify({ prompt: "x", max_tokens: -3 }), 400],
    [JSON.stringify({ prompt: "x", max_tokens: 10 ** 9 }), 400],
    [JSON.stringify({ prompt: [1, 99999] }), 400],
    [JSON.stringify({ prompt: "x", model: "nope" }), 404],
    [JSON.stringify({ prompt: "x", temperature: "hot" }), 400],
  ];
  const [body, want] = pick(cases);
  const r = await fetch(url + "/v1/completions", {
    method: "POST", headers: { "Content-Type": "application/json" }, body,
  });
  const j = await r.json();
  if (r.status !== want || !j.error || !j.error.message) {
    throw new Error(`bad request ${body.slice(0, 40)}: status ${r.status}`);
  }
  count(`${want} as expected`);
}

async function client(id, until) {
  while (Date.now() < until && !server.exited()) {
    const chat = random() < 0.5;
    const path = chat ? "/v1/chat/completions" : "/v1/completions";
    const prompt = pick(prompts);
    const body = {
      max_tokens: 1 + Math.floor(random() * 200),
      temperature: pick([0, 0.7, 1.0]), seed: Math.floor(random() * 1000),
      ...(chat ? { messages: [{ role: "user", content: prompt }] } : { prompt }),
    };
    const roll = random();
    try {
      if (roll < 0.45) await streamed(path, body, -1);
      else if (roll < 0.6) await streamed(path, body, Math.floor(random() * 40));
      else if (roll < 0.8) await whole(path, body);
      else if (roll < 0.92) await bad();
      else {
        const r = await fetch(url + pick(["/readyz", "/v1/models", "/healthz"]));
        if (r.status !== 200) throw new Error("health status " + r.status);
        await r.text();
        count("health ok");
      }
    } catch (e) {
      lost.push(`client ${id}: ${e.message}`);
    }
  }
}

const started = Date.now();
const samples = [];
const sampler = setInterval(() => {
  if (!server.exited()) samples.push([(Date.now() - started) / 1000, rssMb()]);
}, 1000);
await Promise.all(Array.from({ length: clients }, (_, i) => client(i, started + seconds * 1000)));
clearInterval(sampler);
const code = await server.stop();

const warm = samples.filter(([t]) => t >= Math.min(30, seconds / 10));
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const first = warm.slice(0, Math.max(1, Math.floor(warm.length / 10))).map(([, r]) => r);
const last = warm.slice(-Math.max(1, Math.floor(warm.length / 10))).map(([, r]) => r);
const summary = {
  seconds, clients, requests: Object.values(counts).reduce((a, b) => a + b, 0), counts,
  lost: lost.length, server_exit_on_sigterm: code,
  rss_mb: {
    after_warmup_first_tenth_median: median(first), last_tenth_median: median(last),
    min: Math.min(...warm.map(([, r]) => r)), max: Math.max(...warm.map(([, r]) => r)),
  },
};
console.log(JSON.stringify(summary, null, 1));
if (lost.length) console.error("lost:\n" + lost.slice(0, 20).join("\n"));
process.exit(lost.length > 0 || code !== 0 ? 1 : 0);
