#!/usr/bin/env bash
# Runs one of the README's commands the way a newcomer would: in a fresh
# Debian 12 container (podman, a debootstrap'd bookworm with nothing
# installed), on a clean clone of a commit of this repository, and prints its
# wall time. The README's promise is checked with this:
#
#   scripts/fresh_container.sh                   scripts/demo.sh at HEAD
#   scripts/fresh_container.sh --rev c1858fd scripts/demo.sh
#   scripts/fresh_container.sh scripts/test.sh
#
# Only committed work is run (the clone is of --rev, default HEAD). The
# clone is made outside the timing; the base image is built once and kept.
# apt inside the container reaches the same Debian mirror as this machine.
#
# Environment:
#   FLOTILLA_FRESH_STATE   podman's scratch folder (default
#                          /var/tmp/flotilla-fresh; the base image and
#                          clones live there)
#   FLOTILLA_FRESH_ENV     space-separated NAME=VALUE pairs passed into the
#                          container (e.g. FLOTILLA_SKIP_WEB_TESTS=1)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REV=HEAD
if [[ "${1:-}" == "--rev" ]]; then
  [[ $# -ge 2 ]] || { echo "fresh_container: --rev needs a commit" >&2; exit 2; }
  REV="$2"
  shift 2
fi
[[ $# -ge 1 ]] || set -- scripts/demo.sh
for cmd in podman debootstrap git; do
  command -v "${cmd}" >/dev/null 2>&1 ||
    { echo "fresh_container: ${cmd} is missing (scripts/setup.sh --tests installs it)" >&2; exit 1; }
done
COMMIT="$(git -C "${ROOT}" rev-parse --verify "${REV}^{commit}")" ||
  { echo "fresh_container: ${REV} is not a commit of ${ROOT}" >&2; exit 2; }

# shellcheck source=lib/podman_state.sh
source "${ROOT}/scripts/lib/podman_state.sh"
flotilla_podman_state "${FLOTILLA_FRESH_STATE:-/var/tmp/flotilla-fresh}"
D="${FLOTILLA_PODMAN_STATE}"
BASE=docker.io/library/debian:bookworm
flotilla_base_image "${BASE}" fresh_container

CLONE="${D}/clone-${COMMIT:0:12}"
rm -rf "${CLONE}"
git clone -q --no-hardlinks "${ROOT}" "${CLONE}"
git -C "${CLONE}" checkout -q "${COMMIT}"
# The clone sees ../shared only where the project is told to; mount the
# same read-only copy the session has, when there is one.
MOUNTS=(-v "${CLONE}:/work/main")
if [[ -d "${ROOT}/../shared" ]]; then
  MOUNTS+=(-v "$(cd "${ROOT}/../shared" && pwd):/work/shared:ro")
fi
ENVS=()
for kv in ${FLOTILLA_FRESH_ENV:-}; do ENVS+=(-e "${kv}"); done
# Behind a TLS-inspecting proxy the host trusts an extra CA (Node reads it
# from NODE_EXTRA_CA_CERTS); the container's npm needs the same bundle, or
# `npm ci` fails with SELF_SIGNED_CERT_IN_CHAIN. apt is unaffected.
if [[ -n "${NODE_EXTRA_CA_CERTS:-}" && -f "${NODE_EXTRA_CA_CERTS}" ]]; then
  MOUNTS+=(-v "${NODE_EXTRA_CA_CERTS}:/etc/flotilla-host-ca.crt:ro")
  ENVS+=(-e NODE_EXTRA_CA_CERTS=/etc/flotilla-host-ca.crt)
fi

echo "fresh_container: ${*} at ${COMMIT:0:12} in a fresh ${BASE}"
START=$(date +%s.%N)
set +e
# Each line is stamped with the seconds since the start, so the phases
# (packages, configure, compile, link, run) can be read off the log.
podman run --rm "${MOUNTS[@]}" "${ENVS[@]}" -w /work/main "${BASE}" "$@" 2>&1 |
  python3 -u -c '
import sys, time
t0 = time.time()
for line in sys.stdin:
    print(f"[{time.time() - t0:6.1f}] {line}", end="", flush=True)
'
RC=${PIPESTATUS[0]}
set -e
END=$(date +%s.%N)
rm -rf "${CLONE}"
printf 'fresh_container: %s exited %d after %.0f s (commit %s)\n' \
  "${*}" "${RC}" "$(awk -v a="${START}" -v b="${END}" 'BEGIN{print b-a}')" "${COMMIT:0:12}"
exit "${RC}"
