#!/usr/bin/env bash
# io_uring against the pread pool inside a container: decodes with the
# Flotilla image (deploy/docker/Dockerfile) under the runtime's default
# seccomp profile (which refuses io_uring_setup, so --reader auto falls back
# to the pread pool) and with seccomp=unconfined (io_uring allowed), and
# prints the median s/token and read GB/s of each, runs interleaved.
#
#   bench/container_readers.sh MODEL_DIR [--mem 1G] [--tokens 9] [--runs 3]
#       [--image localhost/flotilla:latest] [--engine podman|docker]
set -euo pipefail
MODEL="${1:?usage: bench/container_readers.sh MODEL_DIR [--mem SIZE] [--tokens N] [--runs N]}"
shift
MEM=1G TOKENS=9 RUNS=3 IMAGE=localhost/flotilla:latest ENGINE=podman
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mem) MEM="$2"; shift 2 ;;
    --tokens) TOKENS="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --image) IMAGE="$2"; shift 2 ;;
    --engine) ENGINE="$2"; shift 2 ;;
    *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done
MODEL="$(cd "${MODEL}" && pwd)"
OUT="$(mktemp -d)"
trap 'rm -rf "${OUT}"' EXIT

run() {  # name, extra engine args..., -- generate args...
  local name="$1"; shift
  local engine_args=()
  while [[ "$1" != "--" ]]; do engine_args+=("$1"); shift; done
  shift
  "${ENGINE}" run --rm "${engine_args[@]}" -v "${MODEL}:/model:ro" "${IMAGE}" \
    flotilla-coordinator generate --model /model --mem "${MEM}" \
    --ids 1,2,3,4,5,6,7,8 --max-tokens "${TOKENS}" --ignore-eos --json "$@" \
    >>"${OUT}/${name}.jsonl" 2>>"${OUT}/${name}.err" ||
    { echo "${name}: failed:" >&2; tail -5 "${OUT}/${name}.err" >&2; exit 1; }
}

for ((i = 0; i < RUNS; ++i)); do
  run default-seccomp -- --reader auto
  run unconfined-uring --security-opt seccomp=unconfined -- --reader uring
  run unconfined-pread --security-opt seccomp=unconfined -- --reader pread
done
# What --reader uring says under the default profile.
if "${ENGINE}" run --rm -v "${MODEL}:/model:ro" "${IMAGE}" \
     flotilla-coordinator generate --model /model --mem "${MEM}" --ids 1 \
     --max-tokens 1 --reader uring >/dev/null 2>"${OUT}/refused.err"; then
  echo "default seccomp: --reader uring ran (io_uring allowed)"
else
  echo "default seccomp: --reader uring: $(grep -o 'io_uring unavailable[^;]*' "${OUT}/refused.err" | head -1)"
fi

python3 - "${OUT}" "${MEM}" "${TOKENS}" <<'PY'
import json, statistics, sys, os
out, mem, tokens = sys.argv[1:]
print(f"median over runs; --mem {mem}, {tokens} tokens per run")
print("| container | reader | median s/token | read GB/s | io wait s/token |")
print("|---|---|---|---|---|")
base = None
for name, reader in (("default-seccomp", "auto (pread pool)"),
                     ("unconfined-uring", "uring"),
                     ("unconfined-pread", "pread")):
    runs = [json.loads(l)["stats"] for l in open(os.path.join(out, name + ".jsonl"))]
    s = statistics.median(r["median_s_per_token"] for r in runs)
    gb = statistics.median(r["read_gb_per_s"] for r in runs)
    wait = statistics.median(r["io_wait_s_per_token"] for r in runs)
    print(f"| {name} | {reader} | {s:.3f} | {gb:.2f} | {wait:.3f} |")
PY
