#!/bin/bash
# Decode s/token of the real engine (`flotilla-coordinator generate`)
# through N throttled expert workers (see workers.sh), for the figures users
# feel: with and without the coordinator's Prefetch hints, and with one
# worker killed mid-run (R >= 2). Per config: a warm-up run, then RUNS pairs
# prefetch on / off interleaved, then one run in which worker 1 is killed
# halfway through decode (as the last run with hints was timed). Each run is a fresh `generate --json`; the figure
# is its stats.median_s_per_token (decode steps). Prints every run, then per
# config the medians, the median of the per-pair ratios off/on, and whether
# every run produced the same ids.
#
# usage: bench/distributed/fleet_decode.sh [MODEL_DIR] [BUILD_DIR]
#   MODEL_DIR  default /work/synth-bench (flotilla-tool synth --preset
#              k3-bench, then flotilla-tool pack --model it)
#   env: BPS (per-worker read limit, default 209715200 = 200 MiB/s), TOKENS
#        (default 16), IDS (prompt ids, default 1,2), RUNS (pairs, default
#        3), CONFIGS (N:R pairs, default "2:2 4:2"), KILL (1: the kill run,
#        default 1), WORKER_MEM (2G), WORKER_ARGS, COORD_ARGS (more
#        `generate` flags), OUT (results dir)
# Needs root and cgroup v1 (blkio).
set -euo pipefail

MODEL=${1:-/work/synth-bench}
BUILD=${2:-$(cd "$(dirname "$0")/../.." && pwd)/build}
BPS=${BPS:-209715200}
TOKENS=${TOKENS:-16}
IDS=${IDS:-1,2}
RUNS=${RUNS:-3}
CONFIGS=${CONFIGS:-"2:2 4:2"}
KILL=${KILL:-1}
WORKER_MEM=${WORKER_MEM:-2G}
WORKER_ARGS=${WORKER_ARGS:-}
COORD_ARGS=${COORD_ARGS:-}
OUT=${OUT:-/tmp/flotilla-fleet-decode}
SPLIT_DIR=${SPLIT_DIR:-${MODEL%/}-split}
# shellcheck source=bench/distributed/workers.sh
source "$(dirname "$0")/workers.sh"
COORD=$BUILD/bin/flotilla-coordinator
[[ -x $COORD ]] || { echo "missing $COORD (build it first)" >&2; exit 1; }

# one WORKERS PREFETCH KILL_AFTER_S NAME -> one JSON line on stdout
one() {
  local json=$OUT/$4.json
  # shellcheck disable=SC2086  # COORD_ARGS is a list of flags
  "$COORD" generate --model="$MODEL" --workers="$1" --ids="$IDS" \
    --max-tokens="$TOKENS" --ignore-eos --json --expert-prefetch="$2" \
    $COORD_ARGS > "$json" 2> "$OUT/$4.err" &
  local pid=$!
  if [[ $3 != 0 ]]; then
    sleep "$3"
    kill_worker 1
  fi
  wait "$pid" || { echo "generate failed:" >&2; cat "$OUT/$4.err" >&2; exit 1; }
  python3 - "$json" "$2" "$3" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
s, r, t = j["stats"], j["stats"].get("remote", {}), j["timings"]
print(json.dumps({
    "prefetch": sys.argv[2], "killed_at_s": float(sys.argv[3]),
    "s_per_token": s["median_s_per_token"], "load_s": t["load_s"],
    "prefill_s": t["prefill_s"], "decode_s": t["decode_s"],
    "failed_calls": r.get("failed_calls", 0),
    "retried_calls": r.get("retried_calls", 0),
    "hints": r.get("prefetch_hints_sent", 0),
    "expert_mb_per_token": s.get("expert_bytes_per_token", 0) / 1e6,
    "ids": j["generated_ids"]}))
EOF
}

RESULTS=$OUT/results.jsonl
: > "$RESULTS"
for cfg in $CONFIGS; do
  n=${cfg%%:*}; r=${cfg##*:}
  addrs=()
  for ((k = 0; k < n; k++)); do addrs+=("$(start_worker $k $n $r 1)"); done
  list=$(IFS=,; echo "${addrs[*]}")
  echo "== N=$n R=$r throttled to $BPS B/s per worker" >&2
  one "$list" true 0 "n${n}r${r}-warm" > /dev/null
  last=
  for ((i = 0; i < RUNS; i++)); do
    for p in true false; do
      line=$(one "$list" "$p" 0 "n${n}r${r}-$i-$p")
      [[ $p == true ]] && last=$line
      echo "{\"config\":\"N=$n R=$r\",\"run\":$i,\"result\":$line}" |
        tee -a "$RESULTS"
    done
  done
  if [[ $KILL == 1 && $r -ge 2 ]]; then
    # Halfway through decode, as timed by the last run with hints.
    at=$(python3 -c 'import json,sys; j=json.loads(sys.argv[1]);
print(round(j["load_s"] + j["prefill_s"] + j["decode_s"] / 2, 2))' "$last")
    line=$(one "$list" true "$at" "n${n}r${r}-kill")
    echo "{\"config\":\"N=$n R=$r\",\"run\":\"kill\",\"result\":$line}" |
      tee -a "$RESULTS"
  fi
  kill_workers
done

python3 - "$RESULTS" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ids = {json.dumps(r["result"]["ids"]) for r in rows}
for cfg in dict.fromkeys(r["config"] for r in rows):
    mine = [r for r in rows if r["config"] == cfg]
    on = [r["result"]["s_per_token"] for r in mine
          if r["run"] != "kill" and r["result"]["prefetch"] == "true"]
    off = [r["result"]["s_per_token"] for r in mine
           if r["run"] != "kill" and r["result"]["prefetch"] == "false"]
    ratios = [b / a for a, b in zip(on, off)]
    print(f"{cfg}: decode s/token with hints {statistics.median(on):.3f} "
          f"(spread {max(on) - min(on):.3f}), without "
          f"{statistics.median(off):.3f} (spread {max(off) - min(off):.3f}); "
          f"without/with median ratio {statistics.median(ratios):.3f}")
    for r in mine:
        if r["run"] == "kill":
            x = r["result"]
            print(f"{cfg}: worker 1 killed at {x['killed_at_s']} s: "
                  f"{x['s_per_token']:.3f} s/token, {x['failed_calls']} "
                  f"failed calls, {x['retried_calls']} retried")
print("generated ids identical across all runs:", len(ids) == 1)
EOF
