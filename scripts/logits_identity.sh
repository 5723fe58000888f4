#!/usr/bin/env bash
# Writes --dump-logits files of a fixed set of runs with the binaries in
# BIN_DIR into OUT_DIR, so two builds can be compared byte for byte:
#
#   scripts/logits_identity.sh BIN_DIR OUT_DIR
#   for f in OUT_A/*.bin; do cmp "$f" "OUT_B/$(basename "$f")"; done
#
# The runs: Kimi K3 ckpt_A in memory and through 2 expert workers; a packed
# k3-tiny synth at --mem 64M, pinned and with no layer pinned; the stories
# model in memory, streamed from its pack with --max-pinned-layers 0, and
# through 2 expert workers. Each run's generated ids are printed.
# Scratch checkpoints and packs go to OUT_DIR/work (removed at the end).
set -euo pipefail

BIN="$(cd "$1" && pwd)"
OUT="$2"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
mkdir -p "${OUT}/work"
WORK="$(cd "${OUT}/work" && pwd)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "${pid}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "${WORK}"
}
trap cleanup EXIT

CKPT_A=tests/fixtures/k3/ckpt_A
STORIES=models/stories260k-moe

# Starts 2 workers on model $1 and prints their addresses, comma-separated.
start_workers() {
  local model="$1" addrs=() k addr
  for k in 0 1; do
    "${BIN}/flotilla-expert-worker" --model "${model}" --shard "${k}/2" \
      --host 127.0.0.1 --port 0 --threads 1 >"${WORK}/worker${k}.log" 2>&1 &
    PIDS+=($!)
  done
  for k in 0 1; do
    addr=""
    for _ in $(seq 1 300); do
      addr=$(sed -n 's/.*listening on \(127\.0\.0\.1:[0-9]*\).*/\1/p' \
               "${WORK}/worker${k}.log" | head -n 1)
      [[ -n "${addr}" ]] && break
      sleep 0.1
    done
    [[ -n "${addr}" ]] || { cat "${WORK}/worker${k}.log" >&2; exit 1; }
    addrs+=("${addr}")
  done
  (IFS=,; echo "${addrs[*]}")
}

stop_workers() {
  for pid in "${PIDS[@]}"; do kill "${pid}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  PIDS=()
}

gen() {  # name model [flags...]
  local name="$1" model="$2"
  shift 2
  "${BIN}/flotilla-coordinator" generate --model "${model}" \
    --dump-logits "${OUT}/${name}.bin" --json "$@" >"${OUT}/${name}.json"
  echo "${name}: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["generated_ids"])' "${OUT}/${name}.json")"
}

gen ckpt_a "${CKPT_A}" --ids 1,2,3,4 --max-tokens 6 --threads 2
W=$(start_workers "${CKPT_A}")
gen ckpt_a_workers "${CKPT_A}" --ids 1,2,3,4 --max-tokens 6 --workers "${W}"
stop_workers

"${BIN}/flotilla-tool" synth --preset k3-tiny --out "${WORK}/k3tiny" \
  --seed 7 >/dev/null
"${BIN}/flotilla-tool" pack --model "${WORK}/k3tiny" >/dev/null
gen k3tiny_64m "${WORK}/k3tiny" --ids 5,6,7 --max-tokens 6 --mem 64M \
  --threads 2
# Every layer through the ring (64M alone pins all of k3-tiny's 13).
gen k3tiny_64m_streamed "${WORK}/k3tiny" --ids 5,6,7 --max-tokens 6 \
  --mem 64M --max-pinned-layers 0 --threads 2

gen stories_memory "${STORIES}" --prompt "Once upon a time" \
  --max-tokens 24 --threads 2
cp -r "${STORIES}" "${WORK}/stories"
"${BIN}/flotilla-tool" pack --model "${WORK}/stories" >/dev/null
gen stories_streamed "${WORK}/stories" --prompt "Once upon a time" \
  --max-tokens 24 --max-pinned-layers 0 --threads 2
W=$(start_workers "${STORIES}")
gen stories_workers "${STORIES}" --prompt "Once upon a time" \
  --max-tokens 24 --workers "${W}"
stop_workers
