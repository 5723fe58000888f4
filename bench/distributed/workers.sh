# Throttled expert workers for the bench scripts of this folder (sourced by
# run.sh and fleet_decode.sh): each worker in its own blkio cgroup (v1)
# limited to BPS bytes/s on the model's disk, one cheap NVMe box each.
# Needs: MODEL, BUILD, BPS, OUT, WORKER_MEM, WORKER_ARGS, SPLIT_DIR set.
WORKER=$BUILD/bin/flotilla-expert-worker
TOOL=$BUILD/bin/flotilla-tool
CG=/sys/fs/cgroup/blkio
mkdir -p "$OUT"

for b in "$WORKER" "$TOOL"; do
  [[ -x $b ]] || { echo "missing $b (build it first)" >&2; exit 1; }
done
# The disk (not partition) holding the model: blk-throttle acts on it.
DEV=$(df --output=source "$MODEL" | tail -1)
DISK=/dev/$(lsblk -no PKNAME "$DEV" 2>/dev/null | head -1)
[[ $DISK == /dev/ ]] && DISK=$DEV
MAJMIN=$(lsblk -dno MAJ:MIN "$DISK" | tr -d ' ')
echo "model $MODEL on $DISK ($MAJMIN); per-worker read limit $BPS B/s"

PIDFILE=$OUT/worker.pids
: > "$PIDFILE"
# kill_worker K: SIGKILL to the K-th worker started (0-based), as a machine
# lost mid-run.
kill_worker() {
  local p
  p=$(sed -n "$(($1 + 1))p" "$PIDFILE")
  [[ -n $p ]] && kill -9 "$p" 2>/dev/null || true
}
kill_workers() {
  while read -r p; do kill -9 "$p" 2>/dev/null || true; done < "$PIDFILE"
  while read -r p; do
    while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
  done < "$PIDFILE"
  : > "$PIDFILE"
}
cleanup() {
  kill_workers
  for d in "$CG"/flotilla-bench-w*; do [[ -d $d ]] && rmdir "$d" 2>/dev/null || true; done
}
trap cleanup EXIT

# split_folders N -> the folder holding worker-0 .. worker-(N-1) of a split
# pack of MODEL (packed on first use; a complete pack is left as it is).
split_folders() {
  local dir=$SPLIT_DIR/n$1
  "$TOOL" pack --model="$MODEL" --out="$dir" --workers="$1" --split >&2
  echo "$dir/workers"
}

# start_worker K N R THROTTLE -> prints host:port (R = s: split worker K)
start_worker() {
  local k=$1 n=$2 r=$3 throttle=$4 log=$OUT/worker-$1-of-$2.log
  local cg=$CG/flotilla-bench-w$k join=""
  local serve="--model=$MODEL --shard=$k/$n --replicas=$r"
  if [[ $r == s ]]; then
    local folder
    folder=$(split_folders "$n")/worker-$k
    serve="--model=$folder --split=$folder/split.json"
  fi
  if [[ $throttle == 1 ]]; then
    mkdir -p "$cg"
    echo "$MAJMIN $BPS" > "$cg/blkio.throttle.read_bps_device"
    join="echo \$\$ > $cg/cgroup.procs && "
  fi
  # Join the cgroup (throttled runs only, so loopback runs need no cgroup
  # v1), then become the worker (same pid, same cgroup).
  sh -c "$join exec $WORKER $serve --host=127.0.0.1 --port=0 --threads=1 \
    --mem=$WORKER_MEM --fetch-slots=16 $WORKER_ARGS" > "$log" 2>&1 &
  echo $! >> "$PIDFILE"  # we run in $(...): the parent reads the file
  for _ in $(seq 600); do
    if grep -q "listening on" "$log"; then
      grep -o "listening on [0-9.]*:[0-9]*" "$log" | awk '{print $3}'
      return
    fi
    sleep 0.1
  done
  echo "worker $k did not start:" >&2; cat "$log" >&2; exit 1
}

