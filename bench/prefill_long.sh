#!/usr/bin/env bash
# Prefill time of long prompts on the Qwen3-MoE-shaped model of issue 46
# (hidden 256, 4 layers, 8 heads of 128, 16 experts of 256, the real
# 151,936-token vocabulary, 40,960 positions; random weights: the time is
# the point, not the text). Prints one line per length: tokens, prefill
# seconds, tokens/s. A bench, not a test: run it on a quiet machine.
#
#   bench/prefill_long.sh [BINARY] [LENGTHS]   (default: build/bin/
#       flotilla-coordinator, 1000,4000,16000)
#
# Environment: FLOTILLA_PREFILL_MODEL (default /var/tmp/flotilla-q3long,
# written by bench/synth_moe.py when missing), FLOTILLA_THREADS (2).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${1:-${ROOT}/build/bin/flotilla-coordinator}"
LENGTHS="${2:-1000,4000,16000}"
MODEL="${FLOTILLA_PREFILL_MODEL:-/var/tmp/flotilla-q3long}"
if [[ ! -f "${MODEL}/model.safetensors" ]]; then
  python3 "${ROOT}/bench/synth_moe.py" qwen3_moe "${MODEL}" hidden=256 \
    layers=4 heads=8 experts=16 moe_inter=256 vocab=151936 max_pos=40960
fi
for n in ${LENGTHS//,/ }; do
  ids="$(python3 -c "import random; random.seed(${n}); print(','.join(str(random.randrange(2, 151000)) for _ in range(${n})))")"
  "${BIN}" generate --model "${MODEL}" --ids "${ids}" --max-tokens 1 \
    --threads "${FLOTILLA_THREADS:-2}" --json 2>/dev/null |
    python3 -c "
import json, sys
for line in sys.stdin:
    if line.startswith('{'):
        t = json.loads(line)['timings']
        print(f'${n} tokens: prefill {t[\"prefill_s\"]:.2f} s, {${n} / t[\"prefill_s\"]:.0f} tokens/s')
"
done
