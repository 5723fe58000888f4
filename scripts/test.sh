#!/usr/bin/env bash
# Sets up dependencies, builds, and runs every test with ctest. Exits
# non-zero if anything fails (including finding no tests at all).
#
#   scripts/test.sh [--sanitize | --sanitize=thread] [extra cmake args...]
#
# Environment:
#   FLOTILLA_SANITIZE=1  (or --sanitize) build with ASan+UBSan into
#                        build-asan (RelWithDebInfo) and test there
#   FLOTILLA_SANITIZE=thread  (or --sanitize=thread) build with
#                        ThreadSanitizer into build-tsan and test there
#                        (tests/tsan.supp: what is suppressed and why)
#   FLOTILLA_BUILD_DIR   build folder (default: build, or build-asan)
#   FLOTILLA_SKIP_SETUP  1 = do not run scripts/setup.sh
#   FLOTILLA_CTEST_JOBS  parallel tests (default: 2)
#   FLOTILLA_SKIP_WEB_TESTS  1 = do not install tests/web's npm packages (the
#                        OpenAI-client and chat-page tests are then left out)
#   FLOTILLA_AGENT_CLIS  1 = also install tests/agents' npm packages (Claude
#                        Code and Codex, ~830 MB) so the agent_clis test runs
#   FLOTILLA_SKIP_AARCH64  1 = do not run scripts/aarch64/run.sh (the
#                        kernels cross-built for ARM, under qemu-user)
#   FLOTILLA_SKIP_COMPOSE_TEST  1 = do not run tests/deploy/compose_test.sh
#                        (the Docker Compose stack under podman)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

SANITIZE="${FLOTILLA_SANITIZE:-0}"
CMAKE_ARGS=()
for arg in "$@"; do
  if [[ "${arg}" == "--sanitize" ]]; then
    SANITIZE=1
  elif [[ "${arg}" == "--sanitize=thread" ]]; then
    SANITIZE=thread
  else
    CMAKE_ARGS+=("${arg}")
  fi
done

if [[ "${SANITIZE}" == "1" ]]; then
  # A separate folder, so switching between the two never forces a full
  # rebuild of the other.
  export FLOTILLA_BUILD_DIR="${FLOTILLA_BUILD_DIR:-build-asan}"
  export FLOTILLA_BUILD_TYPE=RelWithDebInfo
  CMAKE_ARGS+=(-DFLOTILLA_SANITIZE=ON)
  # Stop at the first report with a backtrace; callers may override.
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
elif [[ "${SANITIZE}" == "thread" ]]; then
  export FLOTILLA_BUILD_DIR="${FLOTILLA_BUILD_DIR:-build-tsan}"
  export FLOTILLA_BUILD_TYPE=RelWithDebInfo
  CMAKE_ARGS+=(-DFLOTILLA_SANITIZE=thread -DFLOTILLA_SANITIZE_THREAD=OFF)
  # A race fails its test; reports about gRPC's own (uninstrumented)
  # hand-offs are suppressed, see tests/tsan.supp.
  export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=${ROOT}/tests/tsan.supp}"
elif [[ "${SANITIZE}" != "0" ]]; then
  echo "test: FLOTILLA_SANITIZE=${SANITIZE}: expected 0, 1 or thread" >&2
  exit 2
else
  export FLOTILLA_BUILD_DIR="${FLOTILLA_BUILD_DIR:-build}"
  # A sanitizer-configured cache in the plain folder would silently keep
  # building sanitized; make the choice explicit every time.
  CMAKE_ARGS=(-DFLOTILLA_SANITIZE=OFF "${CMAKE_ARGS[@]}")
fi

# The web tests' packages (npm "openai" and "puppeteer-core", pinned by
# tests/web/package-lock.json) before configuring: CMake registers those
# tests only when they are installed.
if [[ "${FLOTILLA_SKIP_SETUP:-0}" != "1" ]]; then
  "${ROOT}/scripts/setup.sh" --tests
fi
if [[ "${FLOTILLA_SKIP_WEB_TESTS:-0}" != "1" ]]; then
  web="${ROOT}/tests/web"
  if [[ ! -f "${web}/node_modules/.package-lock.json" ||
        "${web}/package-lock.json" -nt "${web}/node_modules/.package-lock.json" ]]; then
    echo "test: installing tests/web npm packages (npm ci)"
    if ! npm ci --prefix "${web}" --no-audit --no-fund; then
      echo "test: npm ci failed; set FLOTILLA_SKIP_WEB_TESTS=1 to run without the web tests" >&2
      exit 1
    fi
  fi
fi

if [[ "${FLOTILLA_AGENT_CLIS:-0}" == "1" ]]; then
  agents="${ROOT}/tests/agents"
  if [[ ! -x "${agents}/node_modules/.bin/codex" ]]; then
    echo "test: installing tests/agents npm packages (npm ci, ~830 MB)"
    npm ci --prefix "${agents}" --no-audit --no-fund
  fi
fi

FLOTILLA_WITH_TESTS=1 "${ROOT}/scripts/build.sh" "${CMAKE_ARGS[@]}"

ctest --test-dir "${FLOTILLA_BUILD_DIR}" --output-on-failure --no-tests=error \
  -j"${FLOTILLA_CTEST_JOBS:-2}"

# The kernels cross-built for aarch64 and run under qemu-user: the NEON and
# SVE paths against the scalar bits (skips, saying what is missing, where
# the cross tools are not installed: scripts/aarch64/run.sh --install).
if [[ "${FLOTILLA_SKIP_AARCH64:-0}" != "1" && "${SANITIZE}" == "0" ]]; then
  "${ROOT}/scripts/aarch64/run.sh"
fi

# The Compose deployment for real (podman; skips, saying why, where podman
# cannot run a container). Not a ctest: it builds the images (minutes).
if [[ "${FLOTILLA_SKIP_COMPOSE_TEST:-0}" != "1" && "${SANITIZE}" == "0" ]]; then
  "${ROOT}/tests/deploy/compose_test.sh"
fi
