#!/usr/bin/env bash
# Sets up dependencies, builds, and runs greedy generation on the embedded
# tiny K3 checkpoint (models/tiny-k3), first as text and then as JSON.
# Extra arguments go to both generate runs (e.g. --temperature 0.8 --seed 1).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

# Only what the demo runs: the tests and benchmarks are scripts/test.sh's.
FLOTILLA_TARGETS="flotilla-coordinator" "${ROOT}/scripts/build.sh"

BIN="${FLOTILLA_BUILD_DIR:-build}/bin/flotilla-coordinator"
MODEL="models/tiny-k3"
ARGS=(generate --model "${MODEL}" --ids 3,7,11,5,9 --max-tokens 16 "$@")

echo "+ ${BIN} ${ARGS[*]}"
"${BIN}" "${ARGS[@]}"
echo "+ ${BIN} ${ARGS[*]} --json"
"${BIN}" "${ARGS[@]}" --json
