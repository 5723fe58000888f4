#!/usr/bin/env bash
# Predicted against measured seconds per decoded token: `flotilla-tool
# doctor` (disk probes + kernel rates) and `generate --plan` (kernel rates
# timed again, disk figures from doctor) next to a real run, on one model
# at several budgets. Page cache dropped before every run when root.
#
#   bench/predict_check.sh [--model /work/synth-bench] [--mem 1G,2G,4G]
#                          [--tokens 17] [--bin build/bin]
# Prints one row per budget and the ratio predicted / measured; exits 1 when
# a ratio falls outside [0.75, 1.25] (the 25% the predictions must hold).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODEL=/work/synth-bench MEMS=1G,2G,4G TOKENS=17 BIN="${ROOT}/build/bin"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --mem) MEMS="$2"; shift 2 ;;
    --tokens) TOKENS="$2"; shift 2 ;;
    --bin) BIN="$2"; shift 2 ;;
    *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done
TMP="$(mktemp -d)"
trap 'rm -rf "${TMP}"' EXIT
drop() { if [[ "$(id -u)" -eq 0 ]]; then sync; echo 3 >/proc/sys/vm/drop_caches; fi; }

"${BIN}/flotilla-tool" doctor --model "${MODEL}" --mem "${MEMS}" --positions 32 \
  >"${TMP}/doctor" 2>/dev/null
sed -n '/^Compute/,/^Recommendation/p' "${TMP}/doctor"
read -r disk expert single < <(sed -n 's/.*--disk-gbps \([0-9.]*\) --expert-disk-gbps \([0-9.]*\) --single-read-gbps \([0-9.]*\).*/\1 \2 \3/p' "${TMP}/doctor")
echo
printf '%-6s %10s %10s %10s %12s %12s\n' budget doctor plan measured doctor/meas plan/meas
status=0
for mem in ${MEMS//,/ }; do
  doc=$(awk -v m="${mem}" '$1 == m && NF >= 12 {print $12}' "${TMP}/doctor")
  plan=$("${BIN}/flotilla-coordinator" generate --model "${MODEL}" --mem "${mem}" \
    --plan --json --disk-gbps "${disk}" --expert-disk-gbps "${expert}" \
    --single-read-gbps "${single}" |
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)["predicted_seconds_per_token"], 3))')
  drop
  meas=$("${BIN}/flotilla-coordinator" generate --model "${MODEL}" --mem "${mem}" \
    --ids 1,2,3,4,5 --max-tokens "${TOKENS}" --json |
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)["stats"]["median_s_per_token"], 3))')
  read -r rd rp ok < <(python3 -c "
d, p, m = ${doc}, ${plan}, ${meas}
print(round(d / m, 2), round(p / m, 2), int(all(0.75 <= r <= 1.25 for r in (d / m, p / m))))")
  printf '%-6s %10s %10s %10s %12s %12s\n' "${mem}" "${doc}" "${plan}" "${meas}" "${rd}" "${rp}"
  [[ "${ok}" == 1 ]] || status=1
done
exit "${status}"
