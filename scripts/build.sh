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
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

BUILD_DIR="${FLOTILLA_BUILD_DIR:-build}"
BUILD_TYPE="${FLOTILLA_BUILD_TYPE:-Release}"
JOBS="${FLOTILLA_JOBS:-$(nproc)}"

if [[ "${FLOTILLA_SKIP_SETUP:-0}" != "1" ]]; then
  "${ROOT}/scripts/setup.sh"
fi

# An existing build folder keeps the generator it was configured with;
# asking for another one is a hard CMake error, so only pass -G when fresh.
GENERATOR=()
if [[ ! -f "${BUILD_DIR}/CMakeCache.txt" ]]; then
  GENERATOR=(-G Ninja)
fi

cmake -S . -B "${BUILD_DIR}" "${GENERATOR[@]}" \
  -DCMAKE_BUILD_TYPE="${BUILD_TYPE}" "$@"
TARGETS=()
for t in ${FLOTILLA_TARGETS:-}; do TARGETS+=(--target "${t}"); done
cmake --build "${BUILD_DIR}" -j"${JOBS}" "${TARGETS[@]}"
