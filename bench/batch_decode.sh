#!/usr/bin/env bash
# Continuous-batching throughput: aggregate decode tokens/s with 1, 2, 4 and
# 8 sequences stepped together (flotilla-bench-batch), the bytes each step
# reads by source, and the I/O bound N * bytes(1) / bytes(N).
#
#   bench/batch_decode.sh MODEL_DIR [--mem 1G] [--steps 12] [--repeats 3]
#                         [--read-mbps MBPS]
#
# MODEL_DIR is a packed model, e.g. k3-bench:
#   build/bin/flotilla-tool synth --preset k3-bench --out DIR && \
#   build/bin/flotilla-tool pack --model DIR
# --read-mbps runs the bench in a cgroup-v1 blkio group capped at that many
# MB/s of reads from the model's disk (root), to see the disk-bound regime
# on a machine whose disk outruns its cores. Each batch size is run
# --repeats times (interleaved); the table shows medians.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${FLOTILLA_BIN:-$here/build/bin}/flotilla-bench-batch"
model="${1:?usage: bench/batch_decode.sh MODEL_DIR [--mem SIZE] [--steps N] [--repeats N] [--read-mbps MBPS]}"
shift
mem=1G steps=12 repeats=3 mbps="" batches=1,2,4,8
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mem) mem="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --read-mbps) mbps="$2"; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x "$bin" ]] || { echo "build flotilla-bench-batch first ($bin)" >&2; exit 1; }
out="$(mktemp)"
trap 'rm -f "$out"' EXIT

run() {
  "$bin" --model "$model" --mem "$mem" --steps "$steps" --batches "$batches" \
    --seed "$1"
}
if [[ -n "$mbps" ]]; then
  cg=/sys/fs/cgroup/blkio/flotilla-batch-bench
  dev="$(lsblk -no MAJ:MIN "$(df --output=source "$model" | tail -1)" | head -1 | tr -d ' ')"
  mkdir -p "$cg"
  echo "$dev $((mbps * 1000 * 1000))" > "$cg/blkio.throttle.read_bps_device"
  echo "reads from $dev capped at $mbps MB/s" >&2
  for r in $(seq "$repeats"); do
    bash -c "echo \$\$ > $cg/cgroup.procs && exec \"\$0\" \"\$@\"" \
      "$bin" --model "$model" --mem "$mem" --steps "$steps" \
      --batches "$batches" --seed "$r" >> "$out"
  done
  rmdir "$cg" 2>/dev/null || true
else
  for r in $(seq "$repeats"); do run "$r" >> "$out"; done
fi

python3 - "$out" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in rows:
    by.setdefault(r["batch"], []).append(r)
med = lambda xs: statistics.median(xs)
base = by[min(by)]
tps1 = med([r["tokens_per_s"] for r in base])
bytes1 = med([r["trunk_bytes_per_step"] + r["expert_bytes_per_step"] for r in base])
print("| sequences | median step s | tokens/s | x one | trunk MB/step | experts MB/step | experts/MoE layer | I/O wait s/step | I/O bound x |")
print("|---|---|---|---|---|---|---|---|---|")
for n in sorted(by):
    rs = by[n]
    tps = med([r["tokens_per_s"] for r in rs])
    trunk = med([r["trunk_bytes_per_step"] for r in rs])
    experts = med([r["expert_bytes_per_step"] for r in rs])
    print(f"| {n} | {med([r['median_step_s'] for r in rs]):.3f} | {tps:.2f} | "
          f"{tps / tps1:.2f} | {trunk / 1e6:.0f} | {experts / 1e6:.0f} | "
          f"{med([r['experts_per_moe_layer'] for r in rs]):.1f} | "
          f"{med([r['io_wait_s_per_step'] for r in rs]):.3f} | "
          f"{n * bytes1 / (trunk + experts):.2f} |")
print(f"({len(rows)} runs; medians over {len(rows) // len(by)} repeats)")
EOF
