#!/usr/bin/env bash
# The Docker Compose deployment, for real: podman and podman-compose from
# Debian, the debian:bookworm base image built locally by debootstrap (no
# registry is reachable on the test machines), then
#   podman-compose -f deploy/docker/docker-compose.yml up --build
# brings up prepare, three expert workers, the coordinator and Prometheus
# (grafana.yml is left out: its image comes from a registry). A chat
# completion must come back through the coordinator and Prometheus must
# report all four targets up. Prints its wall time.
#
# Skips (exit 0, "SKIPPED: ..." naming why) only when podman cannot run a
# container on this machine (e.g. inside an unprivileged container).
#
# Environment:
#   FLOTILLA_COMPOSE_STATE  podman's scratch folder (default
#                           build/compose-state; kept between runs so the
#                           base image and the layer cache are reused)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${ROOT}"
START=$(date +%s)
skip() {
  echo "compose test: SKIPPED: $*"
  exit 0
}
for cmd in podman podman-compose debootstrap python3; do
  command -v "${cmd}" >/dev/null 2>&1 ||
    { echo "compose test: ${cmd} is missing (scripts/setup.sh --tests installs it)" >&2; exit 1; }
done

# shellcheck source=../../scripts/lib/podman_state.sh
source "${ROOT}/scripts/lib/podman_state.sh"
flotilla_podman_state "${FLOTILLA_COMPOSE_STATE:-${ROOT}/build/compose-state}"
D="${FLOTILLA_PODMAN_STATE}"

# Can podman run a container here at all? A probe image of /bin/true and
# the libraries it links answers without the network.
probe="${D}/probe"
rm -rf "${probe}"
mkdir -p "${probe}/bin"
cp /bin/true "${probe}/bin/true"
for lib in $(ldd /bin/true | grep -o '/[^ ]*'); do
  mkdir -p "${probe}$(dirname "${lib}")"
  cp -L "${lib}" "${probe}${lib}"
done
# The last lines of what a failed podman command printed (not its progress).
last_lines() { tail -n 3 <<<"$1" | tr '\n' ' '; }
if ! out=$(tar -C "${probe}" -c . | podman import - localhost/flotilla-probe:latest 2>&1); then
  rm -rf "${probe}"
  skip "podman cannot import an image here: $(last_lines "${out}")"
fi
if ! out=$(podman run --rm localhost/flotilla-probe:latest /bin/true 2>&1); then
  podman rmi -f localhost/flotilla-probe:latest >/dev/null 2>&1 || true
  rm -rf "${probe}"
  skip "podman cannot run a container here: $(last_lines "${out}")"
fi
podman rmi -f localhost/flotilla-probe:latest >/dev/null 2>&1 || true
rm -rf "${probe}"

BASE=docker.io/library/debian:bookworm
flotilla_base_image "${BASE}" "compose test" || exit 1

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export FLOTILLA_DATA="${D}/data"
export FLOTILLA_HTTP_PORT="$(free_port)" FLOTILLA_PROMETHEUS_PORT="$(free_port)"
PROJECT=flotilla-test
COMPOSE=(podman-compose -p "${PROJECT}" -f deploy/docker/docker-compose.yml)
cleanup() {
  "${COMPOSE[@]}" logs >"${D}/compose.log" 2>&1 || true
  "${COMPOSE[@]}" down -t 1 >/dev/null 2>&1 || true
  podman network rm -f "${PROJECT}_default" >/dev/null 2>&1 || true
}
trap cleanup EXIT
rm -rf "${FLOTILLA_DATA}"

echo "compose test: up --build (log: ${D}/up.log)"
if ! "${COMPOSE[@]}" up --build -d >"${D}/up.log" 2>&1; then
  tail -40 "${D}/up.log" >&2
  echo "compose test: up --build failed (log above)" >&2
  exit 1
fi
BUILT=$(date +%s)

if ! python3 - "${FLOTILLA_HTTP_PORT}" "${FLOTILLA_PROMETHEUS_PORT}" <<'PY'
import json, sys, time, urllib.request
http, prom = sys.argv[1], sys.argv[2]

def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()

def wait(what, probe, timeout):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            if probe():
                return
        except Exception as e:  # not up yet
            last = e
        time.sleep(1)
    sys.exit(f"compose test: FAIL: {what} within {timeout} s (last: {last})")

wait("the coordinator ready", lambda: get(f"http://127.0.0.1:{http}/readyz") is not None, 300)
req = urllib.request.Request(
    f"http://127.0.0.1:{http}/v1/chat/completions",
    data=json.dumps({"model": "stories260k-moe", "max_tokens": 48,
                     "messages": [{"role": "user", "content": "Once upon a time"}]}).encode(),
    headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=120) as r:
    reply = json.loads(r.read())
text = reply["choices"][0]["message"]["content"]
print(f"compose test: chat completion through the coordinator: {reply['usage']}: {text[:60]!r}...")
if reply["usage"]["completion_tokens"] < 1 or not text.strip():
    sys.exit("compose test: FAIL: empty completion")

def all_up():
    active = json.loads(get(f"http://127.0.0.1:{prom}/api/v1/targets"))["data"]["activeTargets"]
    global seen
    seen = [(t["labels"]["instance"], t["health"]) for t in active]
    return len(active) == 4 and all(h == "up" for _, h in seen)
seen = []
wait("Prometheus reporting 4 targets up", all_up, 60)
print("compose test: Prometheus targets:", ", ".join(f"{i} {h}" for i, h in seen))
q = json.loads(get(f"http://127.0.0.1:{prom}/api/v1/query?query=sum(flotilla_coordinator_worker_up)"))
print("compose test: sum(flotilla_coordinator_worker_up) =", q["data"]["result"][0]["value"][1])
PY
then
  tail -60 "${D}/up.log" >&2
  "${COMPOSE[@]}" logs 2>&1 | tail -60 >&2 || true
  exit 1
fi
END=$(date +%s)
echo "compose test: passed in $((END - START)) s (up --build $((BUILT - START)) s)"
