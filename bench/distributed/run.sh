#!/bin/bash
# Expert-phase benchmark of the distributed mode (issue 4, DESIGN.md §2):
# N = 1, 2, 4 expert workers, each in its own blkio cgroup (v1) throttled to
# the same read bandwidth, emulating one cheap NVMe box each; the
# coordinator (trunk in RAM, not throttled) runs greedy decode through
# flotilla-bench-distributed, which prints per-token figures as JSON.
#
# usage: bench/distributed/run.sh [MODEL_DIR] [BUILD_DIR]
#   MODEL_DIR  default /work/synth-bench (flotilla-tool synth --preset k3-bench)
#   env: BPS (per-worker read limit, bytes/s, default 209715200 = 200 MiB/s),
#        TOKENS (generated tokens, default 8), PROMPT (prompt tokens,
#        default 2), CONFIGS (default
#        "1:1 2:1 4:1 2:2 4:2", N:R pairs, throttled; R = s runs a split
#        fleet: `flotilla-tool pack --workers N --split` folders, written
#        once under SPLIT_DIR, default MODEL_DIR-split), LOOPBACK (default
#        "1 4": worker counts run unthrottled, both output kinds, for the
#        RPC overhead; "Ns" runs N split workers), WORKER_MEM (2G),
#        WORKER_ARGS / DRIVER_ARGS (more flags for every worker / for
#        flotilla-bench-distributed, e.g. --threads=1 / --row-sums),
#        DRIVER_THREADS (2), OUT (results dir)
# Throttled runs need root and cgroup v1 (blkio); loopback runs need
# neither. Workers and cgroups are removed on exit.
set -euo pipefail

MODEL=${1:-/work/synth-bench}
BUILD=${2:-$(cd "$(dirname "$0")/../.." && pwd)/build}
BPS=${BPS:-209715200}
TOKENS=${TOKENS:-8}
PROMPT=${PROMPT:-2}
CONFIGS=${CONFIGS-"1:1 2:1 4:1 2:2 4:2"}
LOOPBACK=${LOOPBACK-"1 4"}
WORKER_MEM=${WORKER_MEM:-2G}
WORKER_ARGS=${WORKER_ARGS:-}
DRIVER_ARGS=${DRIVER_ARGS:-}
DRIVER_THREADS=${DRIVER_THREADS:-2}
OUT=${OUT:-/tmp/flotilla-bench-distributed}
SPLIT_DIR=${SPLIT_DIR:-${MODEL%/}-split}
# shellcheck source=bench/distributed/workers.sh
source "$(dirname "$0")/workers.sh"
DRIVER=$BUILD/bin/flotilla-bench-distributed
[[ -x $DRIVER ]] || { echo "missing $DRIVER (build it first)" >&2; exit 1; }

# run N R THROTTLE EXTRA... -> JSON line on stdout
run() {
  local n=$1 r=$2 throttle=$3; shift 3
  local addrs=()
  for ((k = 0; k < n; k++)); do addrs+=("$(start_worker $k $n $r $throttle)"); done
  local list
  list=$(IFS=,; echo "${addrs[*]}")
  # shellcheck disable=SC2086  # DRIVER_ARGS is a list of flags
  "$DRIVER" --model="$MODEL" --workers="$list" --tokens="$TOKENS" \
    --prompt-tokens="$PROMPT" --threads="$DRIVER_THREADS" \
    $DRIVER_ARGS "$@"
  kill_workers
}

RESULTS=$OUT/results.jsonl
: > "$RESULTS"
for cfg in $CONFIGS; do
  n=${cfg%%:*}; r=${cfg##*:}
  name="N=$n R=$r"
  [[ $r == s ]] && name="N=$n split"
  echo "== $name throttled" >&2
  line=$(run "$n" "$r" 1)
  echo "{\"config\":\"$name throttled\",\"result\":$line}" | tee -a "$RESULTS"
done
for n in $LOOPBACK; do
  if [[ $n == *s ]]; then
    n=${n%s}
    echo "== loopback overhead, N=$n split unthrottled" >&2
    line=$(run "$n" s 0)
    echo "{\"config\":\"N=$n split unthrottled\",\"result\":$line}" | tee -a "$RESULTS"
    continue
  fi
  for extra in "" "--row-sums"; do
    echo "== loopback overhead, N=$n R=1 unthrottled $extra" >&2
    line=$(run "$n" 1 0 $extra)
    echo "{\"config\":\"N=$n R=1 unthrottled $extra\",\"result\":$line}" | tee -a "$RESULTS"
  done
done
python3 "$(dirname "$0")/summarize.py" "$RESULTS"
