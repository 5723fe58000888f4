#!/usr/bin/env python3
"""Per-token decode time with and without constrained decoding, end to end
through a running `flotilla-coordinator serve`: a streamed chat completion
with a json_schema response_format against the same request without one,
interleaved A B A B, --repeats times each. The time per token is the
stream's time from its first to its last token over the tokens between, so
prefill is left out. Prints both medians and their ratio.

  build/bin/flotilla-coordinator serve --model DIR --http-port 8080 &
  bench/constrained_tokens.py --url http://127.0.0.1:8080 [--repeats 5]
      [--max-tokens 120]
"""
import argparse
import json
import statistics
import time
import urllib.request

SCHEMA = {"type": "object", "properties": {
    "story": {"type": "string"},
    "characters": {"type": "array", "items": {"type": "string"}},
    "happy": {"type": "boolean"}},
    "required": ["story", "characters", "happy"], "additionalProperties": False}


def per_token_seconds(url, body):
    req = urllib.request.Request(url + "/v1/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    stamps = []
    with urllib.request.urlopen(req) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            choice = chunk["choices"][0] if chunk["choices"] else None
            if choice and choice.get("logprobs") and choice["logprobs"]["content"]:
                stamps += [time.perf_counter()] * len(choice["logprobs"]["content"])
    if len(stamps) < 3:
        raise SystemExit("too few tokens streamed")
    return (stamps[-1] - stamps[0]) / (len(stamps) - 1), len(stamps)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--max-tokens", type=int, default=120)
    a = p.parse_args()
    base = {"messages": [{"role": "user", "content": "Once upon a time"}],
            "max_tokens": a.max_tokens, "temperature": 1, "stream": True,
            "logprobs": True}
    free, constrained, counts = [], [], []
    for i in range(a.repeats + 1):  # the first round warms up
        seed = {"seed": 100 + i}
        t_free, _ = per_token_seconds(a.url, {**base, **seed, "ignore_eos": True})
        t_json, n = per_token_seconds(a.url, {**base, **seed, "response_format": {
            "type": "json_schema", "json_schema": {"name": "s", "schema": SCHEMA}}})
        if i > 0:
            free.append(t_free)
            constrained.append(t_json)
            counts.append(n)
    mf, mc = statistics.median(free), statistics.median(constrained)
    print(f"per token: {mf * 1e3:.3f} ms free, {mc * 1e3:.3f} ms with json_schema "
          f"(median of {a.repeats}; constrained replies {min(counts)}..{max(counts)} "
          f"tokens); ratio {mc / mf:.2f}")


if __name__ == "__main__":
    main()
