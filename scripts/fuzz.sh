#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz, clang with ASan + UBSan) in
# build-fuzz and runs each for SECONDS on a scratch corpus grown from its
# seeds (tests/fuzz/corpus/<harness>). Any crash, leak, sanitizer report or
# input slower than 10 s fails the run; the input that did it is kept in
# build-fuzz/artifacts/ and its path printed. Prints per harness the
# executions, the corpus size and the result.
#
#   scripts/fuzz.sh [SECONDS] [HARNESS...]   (default 30, all harnesses)
#
# Environment:
#   FLOTILLA_FUZZ_DIR   build folder (default build-fuzz)
#   FLOTILLA_FUZZ_RUNS  stop each harness after this many executions too
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
SECONDS_EACH="${1:-30}"
shift || true
BUILD="${FLOTILLA_FUZZ_DIR:-build-fuzz}"
ALL=(safetensors_header config index pack_manifest tiktoken tokenizer_json
     completion_request worker_request chat_template json_schema)
HARNESSES=("$@")
[[ ${#HARNESSES[@]} -gt 0 ]] || HARNESSES=("${ALL[@]}")

for cmd in clang clang++ cmake ninja; do
  command -v "${cmd}" >/dev/null 2>&1 ||
    { echo "fuzz: ${cmd} is missing (scripts/setup.sh --tests installs it)" >&2; exit 1; }
done
cmake -S . -B "${BUILD}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DFLOTILLA_FUZZ=ON \
  -DFLOTILLA_BUILD_TESTS=OFF -DFLOTILLA_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "${BUILD}" --target fuzzers -j"$(nproc)"

ARTIFACTS="${ROOT}/${BUILD}/artifacts"
mkdir -p "${ARTIFACTS}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
failed=0
summary=()
for h in "${HARNESSES[@]}"; do
  bin="${BUILD}/bin/${h}_fuzz"
  [[ -x "${bin}" ]] || { echo "fuzz: no harness ${h}" >&2; exit 2; }
  corpus="${BUILD}/corpus/${h}"
  mkdir -p "${corpus}"
  log="${BUILD}/fuzz-${h}.log"
  runs=()
  [[ -n "${FLOTILLA_FUZZ_RUNS:-}" ]] && runs=(-runs="${FLOTILLA_FUZZ_RUNS}")
  echo "fuzz: ${h} for ${SECONDS_EACH} s (log ${log})"
  # The scratch corpus first: new inputs land there, the seeds stay as
  # they are in the repository.
  if "${bin}" -max_total_time="${SECONDS_EACH}" -timeout=10 \
      -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="${ARTIFACTS}/${h}-" "${runs[@]}" \
      "${corpus}" "tests/fuzz/corpus/${h}" >"${log}" 2>&1; then
    result=ok
  else
    result="FAILED ($(grep -m1 -o 'Test unit written to .*' "${log}" || echo "see ${log}"))"
    failed=1
    tail -40 "${log}" >&2
  fi
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "${log}" | awk '{print $2}' | tail -1)
  files=$(find "${corpus}" -type f | wc -l)
  summary+=("$(printf '%-20s %12s execs %7s corpus files  %s' "${h}" "${execs:-?}" "${files}" "${result}")")
done
printf '%s\n' "${summary[@]}"
exit "${failed}"
