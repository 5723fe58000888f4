#!/usr/bin/env bash
# Sets up dependencies, builds only what the demo runs, starts two expert
# workers on the embedded default model (models/stories260k-moe, Karpathy's
# TinyStories model as an 8-expert Mixtral-style MoE), generates a story
# from "Once upon a time" through them, prints it, and stops the workers.
# Extra arguments go to the generate run (e.g. --temperature 0.8 --seed 1,
# --prompt "The little dog").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
T_START=$(now)
TIMES="$(mktemp)"
# Only the packages and targets the demo runs: the test stack, the tests
# and the benchmarks are scripts/test.sh's.
"${ROOT}/scripts/setup.sh"
T_SETUP=$(now)
FLOTILLA_SKIP_SETUP=1 FLOTILLA_WITH_TESTS=0 FLOTILLA_TIMES_FILE="${TIMES}" \
  FLOTILLA_TARGETS="flotilla-coordinator flotilla-expert-worker" \
  "${ROOT}/scripts/build.sh"
CONFIGURE_S=$(awk '$1 == "configure" { print $2 }' "${TIMES}")
BUILD_S=$(awk '$1 == "build" { print $2 }' "${TIMES}")
rm -f "${TIMES}"

BIN="${FLOTILLA_BUILD_DIR:-build}/bin"
MODEL="models/stories260k-moe"
LOGS="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "${pid}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "${LOGS}"
}
trap cleanup EXIT

# Each worker picks a free port and prints it ("listening on HOST:PORT").
ADDRS=()
for k in 0 1; do
  "${BIN}/flotilla-expert-worker" --model "${MODEL}" --shard "${k}/2" \
    --host 127.0.0.1 --port 0 --threads 1 >"${LOGS}/worker${k}.log" 2>&1 &
  PIDS+=($!)
done
for k in 0 1; do
  for _ in $(seq 1 300); do
    addr=$(sed -n 's/.*listening on \(127\.0\.0\.1:[0-9]*\).*/\1/p' \
             "${LOGS}/worker${k}.log" | head -n 1)
    [[ -n "${addr}" ]] && break
    if ! kill -0 "${PIDS[$k]}" 2>/dev/null; then
      echo "demo: expert worker ${k} exited:" >&2
      cat "${LOGS}/worker${k}.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  if [[ -z "${addr}" ]]; then
    echo "demo: expert worker ${k} did not start:" >&2
    cat "${LOGS}/worker${k}.log" >&2
    exit 1
  fi
  echo "+ expert worker ${k}/2 on ${addr} (${MODEL})"
  ADDRS+=("${addr}")
done

WORKERS="$(IFS=,; echo "${ADDRS[*]}")"
ARGS=(generate --model "${MODEL}" --workers "${WORKERS}"
      --prompt "Once upon a time" --max-tokens 512 "$@")
echo "+ ${BIN}/flotilla-coordinator ${ARGS[*]}"
T_WORKERS=$(now)
"${BIN}/flotilla-coordinator" "${ARGS[@]}"
T_END=$(now)
echo "demo: packages $(elapsed "${T_START}" "${T_SETUP}") s, configure" \
  "${CONFIGURE_S} s, build ${BUILD_S} s, workers up" \
  "$(elapsed "${T_SETUP}" "${T_WORKERS}" | awk -v c="${CONFIGURE_S}" \
      -v b="${BUILD_S}" '{ printf "%.1f", $1 - c - b }') s, story" \
  "$(elapsed "${T_WORKERS}" "${T_END}") s; total" \
  "$(elapsed "${T_START}" "${T_END}") s"
