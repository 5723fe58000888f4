#!/usr/bin/env bash
# Sets up dependencies, configures and builds Flotilla.
#
#   scripts/build.sh [extra cmake args...]     e.g. -DFLOTILLA_SANITIZE=ON
#
# Environment:
#   FLOTILLA_BUILD_DIR   build folder (default: build), relative to the repo
#   FLOTILLA_BUILD_TYPE  CMAKE_BUILD_TYPE (default: Release)
#   FLOTILLA_SKIP_SETUP  1 = do not run scripts/setup.sh
#   FLOTILLA_JOBS        parallel build jobs (default: nproc)
#   FLOTILLA_TARGETS     build only these targets (space-separated; default:
#                        everything, tests and benchmarks included)
#   FLOTILLA_WITH_TESTS  0 = configure without the test and benchmark
#                        targets, and install only the packages the binaries
#                        need (scripts/demo.sh); default 1
#   FLOTILLA_TIMES_FILE  if set, "configure S" and "build S" lines (seconds)
#                        are appended to it
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

BUILD_DIR="${FLOTILLA_BUILD_DIR:-build}"
BUILD_TYPE="${FLOTILLA_BUILD_TYPE:-Release}"
JOBS="${FLOTILLA_JOBS:-$(nproc)}"

WITH_TESTS="${FLOTILLA_WITH_TESTS:-1}"
if [[ "${FLOTILLA_SKIP_SETUP:-0}" != "1" ]]; then
  if [[ "${WITH_TESTS}" == "0" ]]; then
    "${ROOT}/scripts/setup.sh"
  else
    "${ROOT}/scripts/setup.sh" --build-tests
  fi
fi
# Said every time: a folder configured by the demo (no tests) gets its test
# targets back when the tests are built, and the other way round.
if [[ "${WITH_TESTS}" == "0" ]]; then
  TEST_ARGS=(-DFLOTILLA_BUILD_TESTS=OFF -DFLOTILLA_BUILD_BENCHMARKS=OFF)
else
  TEST_ARGS=(-DFLOTILLA_BUILD_TESTS=ON -DFLOTILLA_BUILD_BENCHMARKS=ON)
fi
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# An existing build folder keeps the generator it was configured with;
# asking for another one is a hard CMake error, so only pass -G when fresh.
GENERATOR=()
if [[ ! -f "${BUILD_DIR}/CMakeCache.txt" ]]; then
  GENERATOR=(-G Ninja)
fi

t0=$(now)
cmake -S . -B "${BUILD_DIR}" "${GENERATOR[@]}" \
  -DCMAKE_BUILD_TYPE="${BUILD_TYPE}" "${TEST_ARGS[@]}" "$@"
t1=$(now)
TARGETS=()
for t in ${FLOTILLA_TARGETS:-}; do TARGETS+=(--target "${t}"); done
cmake --build "${BUILD_DIR}" -j"${JOBS}" "${TARGETS[@]}"
t2=$(now)
if [[ -n "${FLOTILLA_TIMES_FILE:-}" ]]; then
  printf 'configure %s\nbuild %s\n' "$(elapsed "${t0}" "${t1}")" \
    "$(elapsed "${t1}" "${t2}")" >>"${FLOTILLA_TIMES_FILE}"
fi
