#!/bin/bash
# Decode s/token through 2 expert workers, two builds (or two flag sets)
# interleaved A B A B ..., on one model. Each side gets its own pair of
# workers (started once, from its own bin folder), and each run is a fresh
# `flotilla-coordinator generate --json`; the figure is the run's
# stats.median_s_per_token (decode steps only). Prints every run, then the
# median of each side, the spread (max - min) of each side, and the median
# of the per-pair ratios B/A.
#
# usage: bench/distributed/ab_decode.sh MODEL BIN_A BIN_B [RUNS]
#   env: A_ARGS / B_ARGS (more coordinator flags per side), A_WORKER_ARGS /
#        B_WORKER_ARGS (more worker flags per side), TOKENS (default 16),
#        IDS (prompt ids, default 1,2)
set -euo pipefail
MODEL=$1; A=$2; B=$3; RUNS=${4:-5}
TOKENS=${TOKENS:-16}; IDS=${IDS:-1,2}
OUT=$(mktemp -d /tmp/flotilla-ab.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# start_worker BIN K ARGS LOG -> address on stdout
start_worker() {
  # shellcheck disable=SC2086  # ARGS is a list of flags
  "$1/flotilla-expert-worker" --model="$MODEL" --shard="$2/2" --port=0 \
    --host=127.0.0.1 --threads=1 --mem=2G $3 > "$4" 2>&1 &
  PIDS+=($!)
}
wait_address() {
  for _ in $(seq 600); do
    if grep -q "listening on" "$1"; then
      grep -o "listening on [0-9.]*:[0-9]*" "$1" | awk '{print $3}'; return
    fi
    sleep 0.1
  done
  echo "worker did not start: $1" >&2; cat "$1" >&2; exit 1
}
start_worker "$A" 0 "${A_WORKER_ARGS:-}" "$OUT/a0.log"
start_worker "$A" 1 "${A_WORKER_ARGS:-}" "$OUT/a1.log"
start_worker "$B" 0 "${B_WORKER_ARGS:-}" "$OUT/b0.log"
start_worker "$B" 1 "${B_WORKER_ARGS:-}" "$OUT/b1.log"
WA="$(wait_address "$OUT/a0.log"),$(wait_address "$OUT/a1.log")"
WB="$(wait_address "$OUT/b0.log"),$(wait_address "$OUT/b1.log")"

# one BIN WORKERS ARGS -> s/token
one() {
  # shellcheck disable=SC2086
  "$1/flotilla-coordinator" generate --model="$MODEL" --workers="$2" \
    --ids="$IDS" --max-tokens="$TOKENS" --json $3 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["stats"]["median_s_per_token"], " ".join(map(str, j["generated_ids"])))'
}
one "$A" "$WA" "${A_ARGS:-}" > /dev/null  # warm-up (page cache, connections)
one "$B" "$WB" "${B_ARGS:-}" > /dev/null
: > "$OUT/runs"
for ((i = 0; i < RUNS; i++)); do
  ra=$(one "$A" "$WA" "${A_ARGS:-}"); rb=$(one "$B" "$WB" "${B_ARGS:-}")
  echo "run $i: A ${ra%% *} s/token, B ${rb%% *} s/token"
  [[ ${ra#* } == "${rb#* }" ]] || echo "  ids differ: A ${ra#* } / B ${rb#* }"
  echo "${ra%% *} ${rb%% *}" >> "$OUT/runs"
done
python3 - "$OUT/runs" <<'PY'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
a = [r[0] for r in rows]; b = [r[1] for r in rows]
ratio = [y / x for x, y in rows]
print(f"A median {statistics.median(a):.4f} s/token (spread {max(a)-min(a):.4f}), "
      f"B median {statistics.median(b):.4f} s/token (spread {max(b)-min(b):.4f}), "
      f"B/A median {statistics.median(ratio):.3f} (min {min(ratio):.3f}, max {max(ratio):.3f})")
PY
