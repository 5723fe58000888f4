#!/usr/bin/env bash
# Speculative decoding against plain decoding (issue 35): decode s/token and
# bytes read per generated token when K of the D guesses of every pass are
# right. The guesses come from the bench-only drafter `--speculate
# replay:FILE:K`, which replays the plain run recorded first, so each pass
# keeps exactly K (the output is the plain one, checked every run). Runs are
# interleaved (plain, K=0, K=1, ...) --runs times; the table shows medians.
#
#   bench/speculative_decode.sh MODEL_DIR [--mem 1G] [--runs 5]
#                               [--tokens 16] [--draft 4]
#
# MODEL_DIR is a packed model, e.g. k3-bench:
#   build/bin/flotilla-tool synth --preset k3-bench --out DIR && \
#   build/bin/flotilla-tool pack --model DIR
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${FLOTILLA_BIN:-$here/build/bin}/flotilla-coordinator"
model="${1:?usage: bench/speculative_decode.sh MODEL_DIR [--mem SIZE] [--runs N] [--tokens N] [--draft D]}"
shift
mem=1G runs=5 tokens=16 draft=4
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mem) mem="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --tokens) tokens="$2"; shift 2 ;;
    --draft) draft="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x "$bin" ]] || { echo "build flotilla-coordinator first ($bin)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
gen() {
  "$bin" generate --model "$model" --ids 1,2,3,4,5,6,7,8 \
    --max-tokens "$((tokens + 1))" --mem "$mem" --json "$@" 2>/dev/null
}
gen > "$work/record.json"
for r in $(seq "$runs"); do
  gen > "$work/plain.$r.json"
  for k in $(seq 0 "$draft"); do
    gen --speculate "replay:$work/record.json:$k" --draft-tokens "$draft" \
      > "$work/k$k.$r.json"
  done
done
python3 - "$work" "$runs" "$draft" "$mem" "$model" <<'PY'
import json, statistics, sys
work, runs, draft, mem, model = (sys.argv[1], int(sys.argv[2]),
                                 int(sys.argv[3]), sys.argv[4], sys.argv[5])
record = json.load(open(f"{work}/record.json"))["generated_ids"]
def load(name):
    rows = []
    for r in range(1, runs + 1):
        j = json.load(open(f"{work}/{name}.{r}.json"))
        if j["generated_ids"] != record:
            sys.exit(f"{name} run {r}: output differs from the plain run")
        n = len(j["generated_ids"]) - 1
        s = j["stats"]
        rows.append((j["timings"]["decode_s"] / n,
                     (s["trunk_bytes_per_token"] + s["expert_bytes_per_token"]) / 1e9,
                     s["expert_bytes_per_token"] / 1e9,
                     j.get("speculation", {}).get("tokens_per_pass", 1.0)))
    return [statistics.median(c) for c in zip(*rows)]
plain = load("plain")
print(f"{model}; --mem {mem}; {runs} interleaved runs; medians; "
      "every output identical to the plain run")
print(f"{'guesses kept':>14} {'s/token':>9} {'speedup':>8} {'GB/token':>9} {'experts':>8} {'tokens/pass':>12}")
print(f"{'plain':>14} {plain[0]:9.3f} {1.0:8.2f} {plain[1]:9.3f} {plain[2]:8.3f} {1.0:12.2f}")
for k in range(draft + 1):
    row = load(f"k{k}")
    print(f"{f'{k} of {draft}':>14} {row[0]:9.3f} {plain[0] / row[0]:8.2f} {row[1]:9.3f} {row[2]:8.3f} {row[3]:12.2f}")
PY
