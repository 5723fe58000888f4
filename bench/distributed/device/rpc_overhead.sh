#!/bin/bash
# Per-MoE-layer gRPC RPC overhead on loopback, self-contained (no Debian
# grpc/protobuf/absl needed): bundled binaries of commit commit.txt and their
# libraries, unpacked from bundle.tar.xz into /tmp.
#
#   bash bench/distributed/device/rpc_overhead.sh   (from the repo root;
#       bundle from make_bundle.sh in .devbundle/, git-ignored; results in $OUT)
#
# What it runs (the LOOPBACK part of bench/distributed/run.sh, same worker
# and driver flags, with bench/distributed/README.md session 4's interleaving):
#   for round: for BUSY_POLL_US in 0 10000:
#     for N in 1 4: for outputs, row sums: N whole-expert workers
#       (--shard=K/N --replicas=1), then
#     for N in 2 4: N split workers (expert outputs only), each serving
#       worker-K of `flotilla-tool pack --workers N --split` (packed once,
#       under $WORK/split-nN, before the first round)
#     with workers --threads=1 --mem=2G --fetch-slots=16 --busy-poll-us=BP and
#     flotilla-bench-distributed --tokens=$TOKENS --prompt-tokens=2
#       --threads=2 --busy-poll-us=BP [--row-sums]
#   plus flotilla-bench-loopback [--poll] (default args, and --work-us=0
#   --gap-us=0), ROUNDS times each, interleaved.
# Model: a k3-bench-shaped synthetic checkpoint (see write_config below).
#
# Every polling run is repeated with unary calls instead of ComputeStream
# ("unary"), and with bin-old/ in the bundle (make_bundle.sh with OLD_BIN)
# with the old workers ("old"), interleaved, for A/B comparisons.
# env: ROUNDS (3), TOKENS (16), NS ("1 4"), SPLIT_NS ("2 4"; "" for none),
#      BPS_LIST ("0 10000"),
#      BUDGET_S (230: no new run starts after this many seconds since start),
#      SYNTH_PRESET (unset; e.g. k3-bench to synthesize the full preset),
#      MODEL (use this existing checkpoint instead of synthesizing),
#      WORK (/tmp/flotilla-rpc-bench), OUT (/tmp/flotilla-rpc-bench-out),
#      FORCE_BUNDLED_GLIBC=1 (run through the bundled loader and glibc)
set -u
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
HERE=${BUNDLE_DIR:-$PWD/.devbundle}
OUT=${OUT:-/tmp/flotilla-rpc-bench-out}
WORK=${WORK:-/tmp/flotilla-rpc-bench}
ROUNDS=${ROUNDS:-3}
TOKENS=${TOKENS:-16}
NS=${NS-"1 4"}
SPLIT_NS=${SPLIT_NS-"2 4"}
BPS_LIST=${BPS_LIST:-"0 10000"}
BUDGET_S=${BUDGET_S:-230}
mkdir -p "$OUT" "$WORK"

main() {
echo "== environment"
echo "nproc: $(nproc)"
echo "uname: $(uname -a)"
echo "glibc: $(ldd --version 2>&1 | head -1)"
grep -m1 "model name" /proc/cpuinfo
echo "load: $(cat /proc/loadavg)"
free -g 2>/dev/null | sed -n 2p
echo "pwd: $PWD; bundle: $HERE"

# --- unpack --------------------------------------------------------------
B=$WORK/bundle
rm -rf "$B" && mkdir -p "$B"
if command -v xz >/dev/null 2>&1; then
  tar -C "$B" -xJf "$HERE/bundle.tar.xz"
else
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$HERE/bundle.tar.xz" "$B"
fi || { echo "FATAL: cannot unpack $HERE/bundle.tar.xz"; exit 1; }
BIN=$B/bin; L=$B/lib; LG=$B/lib-glibc
echo "binaries of commit $(cat "$B/commit.txt"); need $(cat "$B/glibc-needed.txt")"
[[ -d $B/bin-old ]] && echo "old workers (bin-old) of commit $(cat "$B/commit-old.txt" 2>/dev/null)"
# Our libraries for our binaries only (python3 and coreutils keep the system's).
RUN=(env LD_LIBRARY_PATH="$L")
if [[ ${FORCE_BUNDLED_GLIBC:-0} == 1 ]] ||
   ! "${RUN[@]}" "$BIN/flotilla-expert-worker" --help >/dev/null 2>"$WORK/preflight.err"; then
  echo "system glibc cannot run the bundle (or FORCE_BUNDLED_GLIBC=1):" \
       "$(head -2 "$WORK/preflight.err" 2>/dev/null | tr '\n' ' ')"
  echo "using the bundled glibc and loader"
  RUN=("$LG/ld-linux-x86-64.so.2" --library-path "$L:$LG")
  "${RUN[@]}" "$BIN/flotilla-expert-worker" --help >/dev/null ||
    { echo "FATAL: bundled loader cannot run the binaries either"; exit 1; }
fi

# --- model ---------------------------------------------------------------
# k3-bench (tools/synth_config.cc Bench()) with 16 routed experts per layer
# instead of 256: same trunk (24 layers, hidden 2048, vocab 32768, so the
# same attention/lm_head gaps between calls), same routing width (top-8),
# same experts (1024 x 768, 1.25 MB, read with O_DIRECT at every call, so
# the worker does the same I/O and compute per call) and the same messages
# (8 KiB request rows, 8 x 1024 floats back). 2.15 GB instead of 8.6 GB.
write_config() {
  cat > "$1" <<'EOF'
{"hidden_size": 2048, "num_hidden_layers": 24, "vocab_size": 32768,
 "rms_norm_eps": 1e-05, "kda_num_heads": 16, "kda_head_dim": 128,
 "short_conv_kernel_size": 4, "gate_lower_bound": -5.0,
 "num_attention_heads": 16, "q_lora_rank": 512, "kv_lora_rank": 256,
 "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "v_head_dim": 64,
 "mla_use_output_gate": true, "num_experts": 16, "num_experts_per_token": 8,
 "num_shared_experts": 2, "routed_expert_hidden_size": 1024,
 "moe_intermediate_size": 768, "routed_scaling_factor": 1.0,
 "moe_renormalize": true, "latent_moe_use_norm": true,
 "first_k_dense_replace": 1, "intermediate_size": 9728,
 "attn_res_block_size": 4, "situ_beta": 4.0, "situ_linear_beta": 25.0,
 "full_attn_layers": [4, 8, 12, 16, 20, 23, 24]}
EOF
}
synth_into() {  # DIR -> 0 on success
  local dir=$1 args
  if [[ -n ${SYNTH_PRESET:-} ]]; then
    args=(--preset "$SYNTH_PRESET"); echo "preset $SYNTH_PRESET" > "$WORK/synth.key"
  else
    write_config "$OUT/synth-config.json"; args=(--config "$OUT/synth-config.json")
    cp "$OUT/synth-config.json" "$WORK/synth.key"
  fi
  if [[ -f $dir/.synth.key ]] && cmp -s "$dir/.synth.key" "$WORK/synth.key"; then
    echo "reusing $dir (same synth settings)"; return 0
  fi
  rm -rf "$dir"; mkdir -p "$dir"
  local t=$(date +%s)
  timeout -k 5 100 "${RUN[@]}" "$BIN/flotilla-tool" synth "${args[@]}" --out "$dir" \
    --force --buffered > "$WORK/synth.log" 2>&1
  local rc=$?
  tail -1 "$WORK/synth.log"
  if (( rc != 0 )); then
    echo "synth into $dir failed (rc $rc)"; tail -5 "$WORK/synth.log"
    (( rc == 124 || rc == 137 )) && return 2  # too slow: a retry would be too
    return 1
  fi
  timeout 60 sync
  cp "$WORK/synth.key" "$dir/.synth.key"
  echo "synth: $(( $(date +%s) - t )) s (with sync) in $(df -T "$dir" | awk 'NR==2 {print $2}') at $dir"
}
echo "== model ($(elapsed) s)"
if [[ -n ${MODEL:-} ]]; then
  M=$MODEL; echo "using MODEL=$M"
else
  M=$WORK/model
  synth_into "$M"; rc=$?
  (( rc == 2 )) && { echo "FATAL: synth timed out"; exit 1; }
  if (( rc != 0 )); then
    M=$HERE/work-model; echo "retrying in $M"
    synth_into "$M" || { echo "FATAL: no model"; exit 1; }
  fi
fi

# --- split packs ----------------------------------------------------------
# pack --force re-packs a folder made from another checkpoint and leaves a
# complete one of this checkpoint as it is.
echo "== split packs ($(elapsed) s)"
SPLIT_OK=()
for n in $SPLIT_NS; do
  t=$(date +%s)
  timeout -k 5 90 "${RUN[@]}" "$BIN/flotilla-tool" pack --model="$M" \
    --out="$WORK/split-n$n" --workers="$n" --split --force --threads=4 \
    > "$WORK/pack-n$n.log" 2>&1
  rc=$?
  if (( rc == 0 )); then
    SPLIT_OK+=("$n")
    echo "pack N=$n split: $(( $(date +%s) - t )) s, $(du -sh "$WORK/split-n$n/workers" | cut -f1) of worker folders"
  else
    echo "pack N=$n split failed (rc $rc), no N=$n split runs:"; tail -5 "$WORK/pack-n$n.log"
  fi
done
SPLIT_NS="${SPLIT_OK[*]}"
timeout 60 sync

# --- raw wake-up cost ----------------------------------------------------
echo "== flotilla-bench-loopback ($(elapsed) s)"
: > "$OUT/loopback.jsonl"
for ((r = 1; r <= ROUNDS; r++)); do
  for args in "" "--poll" "--work-us=0 --gap-us=0" "--work-us=0 --gap-us=0 --poll"; do
    line=$(timeout -k 2 20 "${RUN[@]}" "$BIN/flotilla-bench-loopback" $args)
    rc=$?
    if (( rc != 0 )); then
      echo "loopback [$args] failed (rc $rc)"
      (( rc == 124 || rc == 137 )) && { echo "a hang: skipping the rest of the ping-pong"; break 2; }
      continue
    fi
    echo "{\"round\":$r,\"args\":\"$args\",\"result\":$line}" >> "$OUT/loopback.jsonl"
    echo "round $r [$args]: $line"
  done
done

# --- what gRPC itself adds (unary and stream, both ends polling) ---------
echo "== flotilla-bench-grpc-pingpong ($(elapsed) s)"
: > "$OUT/grpc_pingpong.jsonl"
if [[ -x $BIN/flotilla-bench-grpc-pingpong ]]; then
  for ((r = 1; r <= ROUNDS; r++)); do
    for args in "--mode=unary" "--mode=stream" "--mode=unary --touch-mb=16" \
                "--mode=stream --touch-mb=16" \
                "--mode=unary --touch-mb=16 --touch-elsewhere"; do
      line=$(timeout -k 2 30 "${RUN[@]}" "$BIN/flotilla-bench-grpc-pingpong" $args)
      rc=$?
      if (( rc != 0 )); then echo "grpc ping-pong [$args] failed (rc $rc)"; continue; fi
      echo "{\"round\":$r,\"args\":\"$args\",\"result\":$line}" >> "$OUT/grpc_pingpong.jsonl"
      echo "round $r [$args]: $line"
    done
  done
fi

# --- distributed loopback RPC overhead ------------------------------------
PIDS=()
kill_workers() {  # the workers are not our children (started in $(...))
  local p i
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do
    for ((i = 0; i < 100; i++)); do
      [[ -d /proc/$p && $(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) != Z ]] || break
      sleep 0.05
    done
  done
  PIDS=()
}
trap kill_workers EXIT
start_worker() {  # K N BP SPLIT [BINDIR] -> host:port on stdout; PID appended to $WORK/pids
  local k=$1 n=$2 bp=$3 log=$WORK/worker-$1-of-$2.log serve wbin=${5:-$BIN}
  if [[ $4 == split ]]; then
    local f=$WORK/split-n$n/workers/worker-$k
    serve=(--model="$f" --split="$f/split.json")
  else
    serve=(--model="$M" --shard="$k/$n" --replicas=1)
  fi
  "${RUN[@]}" "$wbin/flotilla-expert-worker" "${serve[@]}" \
    --host=127.0.0.1 --port=0 --threads=1 --mem=2G \
    --fetch-slots=16 --busy-poll-us="$bp" > "$log" 2>&1 &
  echo $! >> "$WORK/pids"
  for _ in $(seq 300); do
    if grep -q "listening on" "$log"; then
      grep -o "listening on [0-9.]*:[0-9]*" "$log" | awk '{print $3}'; return 0
    fi
    kill -0 $! 2>/dev/null || break
    sleep 0.1
  done
  echo "worker $k/$n did not start:" >&2; tail -5 "$log" >&2; return 1
}
one_run() {  # ROUND BP N EXTRA [split|whole] [VARIANT]
  local r=$1 bp=$2 n=$3 extra=$4 mode=${5:-whole} variant=${6:-new} addrs=() a k ok=1 t=$(date +%s.%N)
  local wbin=$BIN driver_extra=""; [[ $variant == old ]] && wbin=$B/bin-old
  # "unary": the new workers, but the driver sends unary Compute calls.
  [[ $variant == unary ]] && driver_extra=--unary
  local name="N=$n R=1 unthrottled $extra" kind=${extra:+row_sums}
  [[ $mode == split ]] && name="N=$n split unthrottled" kind=split
  kind=${kind:-expert_outputs}
  : > "$WORK/pids"
  for ((k = 0; k < n; k++)); do
    if a=$(start_worker $k $n $bp $mode "$wbin"); then addrs+=("$a"); else ok=0; fi
  done
  mapfile -t PIDS < "$WORK/pids"
  if (( ok )); then
    local list; list=$(IFS=,; echo "${addrs[*]}")
    local line
    line=$(timeout -k 5 60 "${RUN[@]}" "$BIN/flotilla-bench-distributed" --model="$M" \
      --workers="$list" --tokens="$TOKENS" --prompt-tokens=2 --threads=2 \
      --busy-poll-us="$bp" $extra $driver_extra 2> "$WORK/driver.err")
    local rc=$?
    if (( rc == 0 )) && [[ $line == \{* ]]; then
      echo "{\"round\":$r,\"busy_poll_us\":$bp,\"variant\":\"$variant\",\"config\":\"$name\",\"kind\":\"$kind\",\"result\":$line}" >> "$OUT/results.jsonl"
      python3 - "$line" "$r" "$bp" "$n" "$kind" "$t" "$variant" <<'EOF'
import json, sys, time
x = json.loads(sys.argv[1])
print(f"round {sys.argv[2]} {sys.argv[7]:<5} bp={sys.argv[3]:>5} N={sys.argv[4]} {sys.argv[5]:<14} "
      f"p50 {x['rpc_overhead_ms_p50']:.3f} p90 {x['rpc_overhead_ms_p90']:.3f} "
      f"mean {x['rpc_overhead_ms_per_layer']:.3f} ms/layer, worker "
      f"{x['worker_ms_per_layer']:.2f} ms, calls/layer {x['calls_per_layer']:.2f}, "
      f"failed {x['failed_calls']} ({time.time() - float(sys.argv[6]):.1f} s)")
EOF
    else
      echo "round $r bp=$bp $name: driver failed (rc $rc): $(tail -3 "$WORK/driver.err" | tr '\n' ' ')"
      for ((k = 0; k < n; k++)); do tail -3 "$WORK/worker-$k-of-$n.log"; done
    fi
  fi
  kill_workers
}
echo "== distributed loopback, TOKENS=$TOKENS, ROUNDS=$ROUNDS, NS=$NS, SPLIT_NS=$SPLIT_NS ($(elapsed) s)"
: > "$OUT/results.jsonl"
last_round=0
for ((r = 1; r <= ROUNDS; r++)); do
  rs=$(date +%s)
  if (( r > 1 && $(elapsed) + last_round > BUDGET_S )); then
    echo "stopping before round $r: $(elapsed) s elapsed, a round takes ~$last_round s, budget $BUDGET_S s"
    break
  fi
  for bp in $BPS_LIST; do
    # Where they differ (the polling front end): the new workers with
    # ComputeStream ("new") and with unary calls ("unary"), and the old
    # workers when bundled ("old").
    variants=new
    if [[ $bp != 0 ]]; then
      variants="new unary"; [[ -d $B/bin-old ]] && variants="new unary old"
    fi
    for v in $variants; do
      for n in $NS; do
        for extra in "" "--row-sums"; do
          if (( $(elapsed) > BUDGET_S )); then echo "budget reached, skipping the rest"; break 5; fi
          one_run "$r" "$bp" "$n" "$extra" whole "$v"
        done
      done
      for n in $SPLIT_NS; do
        if (( $(elapsed) > BUDGET_S )); then echo "budget reached, skipping the rest"; break 4; fi
        one_run "$r" "$bp" "$n" "" split "$v"
      done
    done
  done
  last_round=$(( $(date +%s) - rs ))
  echo "round $r took $last_round s (elapsed $(elapsed) s)"
done

# --- summary -------------------------------------------------------------
echo "== summary ($(elapsed) s)"
python3 - "$OUT/results.jsonl" "$OUT/loopback.jsonl" "$OUT/grpc_pingpong.jsonl" <<'EOF' | tee "$OUT/summary.txt"
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
lb = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
med = lambda v: st.median(v) if v else float("nan")
print("RPC overhead per MoE layer at decode (ms): p50 of each run in round order;")
print("median of the runs' p50, and of their means")
print(f"{'fleet':<9} {'output':<15} {'busy_poll':>9} {'bin':<5} {'p50 per run':<24} {'med p50':>7} {'med mean':>8} {'worker ms':>9} {'calls':>5}")
kind = lambda r: r.get('kind') or r['result']['output']
order = {'expert_outputs': 0, 'row_sums': 1, 'split': 2}
var = lambda r: r.get('variant', 'new')
keys = sorted({(order.get(kind(r), 3), r['result']['workers'], kind(r), r['busy_poll_us'], var(r)) for r in rows})
for _, n, k, bp, v in keys:
    sel = [r['result'] for r in rows if (r['result']['workers'], kind(r), r['busy_poll_us'], var(r)) == (n, k, bp, v)]
    p50 = [x['rpc_overhead_ms_p50'] for x in sel]
    fleet = f"N={n} split" if k == 'split' else f"N={n}"
    out = 'expert_outputs' if k == 'split' else k
    print(f"{fleet:<9} {out:<15} {bp:>9} {v:<5} {' '.join(f'{u:.3f}' for u in p50):<24} {med(p50):>7.3f} "
          f"{med([x['rpc_overhead_ms_per_layer'] for x in sel]):>8.3f} "
          f"{med([x['worker_ms_per_layer'] for x in sel]):>9.2f} "
          f"{med([x['calls_per_layer'] for x in sel]):>5.2f}")
ids = {json.dumps(r['result']['ids']) for r in rows}
sp = [r for r in rows if kind(r) == 'split']
print(f"runs: {len(rows)} ({len(sp)} split); failed calls: {sum(r['result']['failed_calls'] for r in rows)} "
      f"({sum(r['result']['failed_calls'] for r in sp)} split); "
      f"generated ids identical across runs (split included): {len(ids) == 1}")
print("flotilla-bench-loopback: round trip minus server work, p50 per run (us), median")
for a in ["", "--poll", "--work-us=0 --gap-us=0", "--work-us=0 --gap-us=0 --poll"]:
    v = [x['result']['round_trip_minus_work_us_p50'] for x in lb if x['args'] == a]
    print(f"  {a or '(default: 5 ms work, 1 ms gap)':<32} {' '.join(f'{u:.1f}' for u in v):<24} {med(v):.1f}")
gp = [json.loads(l) for l in open(sys.argv[3]) if l.strip()]
print("flotilla-bench-grpc-pingpong (5 ms work, 1 ms gap, both poll): p50 per run (us), median;")
print("  and the medians of the request and answer legs")
for a in ["--mode=unary", "--mode=stream", "--mode=unary --touch-mb=16", "--mode=stream --touch-mb=16",
          "--mode=unary --touch-mb=16 --touch-elsewhere"]:
    sel = [x['result'] for x in gp if x['args'] == a]
    v = [x['round_trip_minus_work_us_p50'] for x in sel]
    print(f"  {a:<32} {' '.join(f'{u:.1f}' for u in v):<24} {med(v):.1f}  "
          f"legs {med([x['request_leg_us_p50'] for x in sel]):.1f} / {med([x['response_leg_us_p50'] for x in sel]):.1f}")
EOF
echo "total $(elapsed) s; files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
}

main 2>&1 | tee "$OUT/run.log"
exit "${PIPESTATUS[0]}"
