#!/usr/bin/env bash
# Full-scale metadata on a small disk: a Kimi K3 checkpoint with the real
# layer and expert counts (93 layers x 896 experts, ~497,000 tensors, a
# ~58 MB model.safetensors.index.json) but tiny matrices (hidden 128,
# routed_expert_hidden_size 64, moe_intermediate_size 64, vocab 1024,
# k3-tiny's attention dims), then what opening it costs: pack time and peak
# RSS, generate's load time, plan baseline and peak RSS at --mem 1G and
# 256M with the RSS after open next to the plan's figure for it, and an
# expert worker holding 1/4 of the experts (start to listening, peak RSS).
# Medians of RUNS, page cache dropped before each run when root.
#
#   bench/full_count.sh [--dir /work/k3fullcount] [--runs 5] [--bin build/bin]
#                       [--write-only]
# --write-only: write the checkpoint (when missing) and stop; the
# full-count test uses it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR=/tmp/flotilla-k3-fullcount RUNS=5 BIN="${ROOT}/build/bin" WRITE_ONLY=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) DIR="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --bin) BIN="$2"; shift 2 ;;
    --write-only) WRITE_ONLY=1; shift ;;
    *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done
TMP="$(mktemp -d)"
trap 'rm -rf "${TMP}"' EXIT
drop() { if [[ "$(id -u)" -eq 0 ]]; then sync; echo 3 >/proc/sys/vm/drop_caches; fi; }

if [[ ! -f "${DIR}/model.safetensors.index.json" ]]; then
  "${BIN}/flotilla-tool" synth --preset k3-full --config-only --force --out "${TMP}/full" >/dev/null
  "${BIN}/flotilla-tool" synth --preset k3-tiny --config-only --out "${TMP}/tiny" >/dev/null
  python3 - "${TMP}" <<'PY'
import json, sys
tmp = sys.argv[1]
full = json.load(open(f"{tmp}/full/config.json"))
tiny = json.load(open(f"{tmp}/tiny/config.json"))
f, t = full.get("text_config", full), tiny.get("text_config", tiny)
f.update(hidden_size=128, routed_expert_hidden_size=64,
         moe_intermediate_size=64, vocab_size=1024)
for k in ("num_attention_heads", "kv_lora_rank", "q_lora_rank",
          "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
    f[k] = t[k]
for k in ("num_heads", "head_dim"):
    f["linear_attn_config"][k] = t["linear_attn_config"][k]
json.dump(full, open(f"{tmp}/config.json", "w"), indent=1)
PY
  "${BIN}/flotilla-tool" synth --config "${TMP}/config.json" --out "${DIR}" --force
fi
if [[ "${WRITE_ONLY}" == 1 ]]; then exit 0; fi
echo "checkpoint ${DIR}: $(du -sh "${DIR}" | cut -f1), $(ls "${DIR}"/*.safetensors | wc -l) shards, index $(stat -c %s "${DIR}/model.safetensors.index.json") bytes"

# time -v's wall seconds and peak RSS (MB) of a command, as "wall rss".
measure() {
  /usr/bin/time -f '%e %M' -o "${TMP}/t" "$@" >"${TMP}/out" 2>"${TMP}/err" ||
    { echo "failed: $*" >&2; tail -5 "${TMP}/err" >&2; return 1; }
  awk '{printf "%s %.1f\n", $1, $2 / 1024}' "${TMP}/t"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }

rm -rf "${DIR}/flotilla-pack"
drop
read -r pack_s pack_mb < <(measure "${BIN}/flotilla-tool" pack --model "${DIR}")
echo "pack: ${pack_s} s, peak RSS ${pack_mb} MiB"

for mem in 1G 256M; do
  : >"${TMP}/load" ; : >"${TMP}/rss" ; : >"${TMP}/open"
  for ((i = 0; i < RUNS; ++i)); do
    drop
    if ! read -r _ rss < <(measure "${BIN}/flotilla-coordinator" generate \
        --model "${DIR}" --mem "${mem}" --ids 1,2,3,4,5 --max-tokens 4 --json); then
      echo "generate --mem ${mem}: $(grep -v '^$' "${TMP}/err" | tail -1)"
      continue 2
    fi
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["timings"]["load_s"])' \
      "${TMP}/out" >>"${TMP}/load"
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["stats"]
print(round(s["rss_after_open_bytes"] / 1e6, 2), round(s["planned_open_bytes"] / 1e6, 2))' \
      "${TMP}/out" >>"${TMP}/open"
    echo "${rss}" >>"${TMP}/rss"
  done
  plan=$("${BIN}/flotilla-coordinator" generate --model "${DIR}" --mem "${mem}" --plan 2>&1 |
         awk '/process.baseline|metadata/ {printf "%s %s %s; ", $1, $2, $3}')
  echo "generate --mem ${mem}: load $(median <"${TMP}/load") s, peak RSS $(median <"${TMP}/rss") MiB (median of ${RUNS}); RSS after open $(cut -d' ' -f1 "${TMP}/open" | median) MB, plan's open charges $(cut -d' ' -f2 "${TMP}/open" | median) MB; plan: ${plan}"
done
mkdir -p "${TMP}/config-only" && cp "${DIR}/config.json" "${TMP}/config-only/"
echo "config-only --plan --mem 1G: $("${BIN}/flotilla-coordinator" generate --model "${TMP}/config-only" --mem 1G --plan 2>&1 |
  awk '/process.baseline|metadata/ {printf "%s %s %s; ", $1, $2, $3}')"

# A serving worker: from start to "listening" (its index built), then its
# peak RSS.
: >"${TMP}/w" ; : >"${TMP}/wr"
for ((i = 0; i < RUNS; ++i)); do
  drop
  start=$(date +%s.%N)
  "${BIN}/flotilla-expert-worker" --model "${DIR}" --shard 0/4 --port 0 >"${TMP}/wout" 2>&1 &
  pid=$!
  for ((t = 0; t < 600; ++t)); do
    grep -q listening "${TMP}/wout" && break
    kill -0 "${pid}" 2>/dev/null || { cat "${TMP}/wout" >&2; exit 1; }
    sleep 0.02
  done
  echo "$(date +%s.%N) ${start}" | awk '{printf "%.2f\n", $1 - $2}' >>"${TMP}/w"
  awk '/VmHWM/ {printf "%.1f\n", $2 / 1024}' "/proc/${pid}/status" >>"${TMP}/wr"
  kill "${pid}"; wait "${pid}" 2>/dev/null || true
done
echo "expert worker 0/4 (start to listening): $(median <"${TMP}/w") s, peak RSS $(median <"${TMP}/wr") MiB (median of ${RUNS})"
