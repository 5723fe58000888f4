#!/usr/bin/env bash
# Installs what Flotilla needs on Debian 12 (bookworm). Idempotent: when
# every package is already installed it only checks (no apt-get update, no
# root needed), so build and test scripts can call it every time. Runs as
# root, or through sudo when available.
#
#   scripts/setup.sh            what building the binaries and the demo
#                               need, and nothing else
#   scripts/setup.sh --build-tests
#                               also what the test and benchmark targets
#                               build with: GoogleTest, Google Benchmark,
#                               cpp-httplib (the tests' HTTP client),
#                               python3, openssl, clang-format
#   scripts/setup.sh --tests    all of that, and Node.js, npm and Chromium
#                               for the web tests
#                               (tests/web), each only when its command is
#                               missing (a newer Node from elsewhere stays),
#                               Prometheus (tests/observe), podman,
#                               podman-compose and debootstrap (tests/deploy)
#                               and clang for the fuzz and sanitizer runs
set -euo pipefail

# Keep in sync with the find_package/pkg_check_modules calls in
# CMakeLists.txt. Some are not obvious: protobuf-compiler-grpc must be present
# for find_package(gRPC CONFIG) to succeed (its config names the plugin), and
# grpc-proto ships the health/reflection .proto files.
# libboost-dev: Boost.Beast's HTTP parser (header-only) under shared/http.
# The demo installs only these (issue 45: every package here is seconds of
# a newcomer's first run).
# g++ rather than build-essential: make, dpkg-dev and its Perl are never
# used (Ninja builds), and unpacking them was seconds of the first run.
PACKAGES=(
  g++ cmake ninja-build ccache pkgconf
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  grpc-proto libabsl-dev prometheus-cpp-dev
  liburing-dev libhwy-dev libpcre2-dev nlohmann-json3-dev libxxhash-dev
  libboost-dev libutf8proc-dev zlib1g-dev
)

case "${1:-}" in
  "" | --build-tests | --tests) ;;
  *)
    echo "setup: unknown option '$1' (--build-tests or --tests)" >&2
    exit 2
    ;;
esac
if [[ "${1:-}" == "--build-tests" || "${1:-}" == "--tests" ]]; then
  # What the test and benchmark targets link (CMake looks for them only
  # with FLOTILLA_BUILD_TESTS / FLOTILLA_BUILD_BENCHMARKS); python3,
  # python3-regex and openssl serve tools and tests; clang-format keeps the
  # style.
  PACKAGES+=(libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev
             python3 python3-regex openssl clang-format)
fi
if [[ "${1:-}" == "--tests" ]]; then
  command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
  command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)
  command -v chromium >/dev/null 2>&1 || PACKAGES+=(chromium)
  # The Prometheus server of tests/observe, and what the compose test
  # (tests/deploy) runs the stack with (../notes: podman needs runc here).
  PACKAGES+=(prometheus podman podman-compose runc debootstrap netavark
             aardvark-dns iptables fuse-overlayfs slirp4netns uidmap catatonit)
  # The libFuzzer harnesses and the sanitizer runs (scripts/fuzz.sh,
  # scripts/tsan.sh): clang with its runtime libraries.
  PACKAGES+=(clang libclang-rt-14-dev)
fi

# One dpkg-query for all packages (one per package takes seconds). Unknown
# packages are simply absent from its output; "install ok installed" is the
# only state in which a package's files are really present.
declare -A installed=()
while IFS=$'\t' read -r pkg status; do
  if [[ "${status}" == "install ok installed" ]]; then
    installed["${pkg}"]=1
  fi
done < <(dpkg-query -W -f='${Package}\t${Status}\n' "${PACKAGES[@]}" \
           2>/dev/null || true)
missing=()
for pkg in "${PACKAGES[@]}"; do
  if [[ -z "${installed[${pkg}]:-}" ]]; then
    missing+=("${pkg}")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

echo "setup: installing ${#missing[@]} missing package(s): ${missing[*]}"
if [[ "$(id -u)" -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "setup: not root and sudo is not available; install as root:" >&2
  echo "  apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# env passes DEBIAN_FRONTEND through sudo, which resets the environment.
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
# Install the whole list, not only the missing part: apt skips what is
# present, and this keeps versions consistent if the mirror moved on.
# Inside a container dpkg's fsync per file is most of the install time and
# protects nothing (the container is thrown away on failure), which is why
# Debian's own container images set force-unsafe-io; do the same there.
DPKG_OPTIONS=()
if [[ -f /.dockerenv || -f /run/.containerenv ]]; then
  DPKG_OPTIONS=(-o Dpkg::Options::=--force-unsafe-io)
fi
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${DPKG_OPTIONS[@]}" \
  "${PACKAGES[@]}"
echo "setup: done"
