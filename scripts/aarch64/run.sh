#!/usr/bin/env bash
# Cross-builds the kernels library and its tests for aarch64 and runs them
# under qemu-user, so the NEON path (Highway) is checked on an x86 machine.
#
#   scripts/aarch64/run.sh [--require | --install]
#
# Needs g++-aarch64-linux-gnu, qemu-user and the arm64 multiarch packages
# libabsl-dev:arm64 libgtest-dev:arm64 libhwy-dev:arm64 (after
# `dpkg --add-architecture arm64`); --install adds the architecture and
# installs them (root). Without them it says what is missing and exits 0,
# or 1 with --require. scripts/test.sh runs it after ctest.
# Build folder: build-aarch64 (FLOTILLA_AARCH64_BUILD_DIR).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${FLOTILLA_AARCH64_BUILD_DIR:-${ROOT}/build-aarch64}"
REQUIRE=0
[[ "${1:-}" == "--require" ]] && REQUIRE=1
if [[ "${1:-}" == "--install" ]]; then
  REQUIRE=1
  dpkg --add-architecture arm64
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    g++-aarch64-linux-gnu qemu-user libabsl-dev:arm64 libgtest-dev:arm64 \
    libhwy-dev:arm64
fi

missing=()
command -v aarch64-linux-gnu-g++ > /dev/null || missing+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64 > /dev/null || missing+=(qemu-user)
for pkg in absl GTest hwy; do
  [[ -d "/usr/lib/aarch64-linux-gnu/cmake/${pkg}" ]] ||
    missing+=("lib${pkg,,}-dev:arm64")
done
if (( ${#missing[@]} > 0 )); then
  echo "aarch64 kernels: skipped, not installed: ${missing[*]}" >&2
  exit "${REQUIRE}"
fi

GENERATOR=()
command -v ninja > /dev/null && GENERATOR=(-G Ninja)
cmake -S "${ROOT}/scripts/aarch64" -B "${BUILD}" "${GENERATOR[@]}" \
  -DCMAKE_TOOLCHAIN_FILE="${ROOT}/scripts/aarch64/toolchain.cmake" > /dev/null
cmake --build "${BUILD}" -j "$(nproc)"
# The binaries run on the multiarch arm64 loader and libc (libc6:arm64,
# which the packages above pull in), found at /lib/ld-linux-aarch64.so.1.
# Not the cross toolchain's copy under /usr/aarch64-linux-gnu: mixing its
# loader with the multiarch libc hangs the first pthread_create.
unset QEMU_LD_PREFIX
ctest --test-dir "${BUILD}" --output-on-failure -j "$(nproc)"
