#!/usr/bin/env python3
"""End-to-end streaming benchmark on the k3-bench synthetic checkpoint.

For memory budgets of about 1, 2 and 4 GB and a fully resident run it
prints s/token (median over decode tokens after warm-up), the read rate, the
disk's ceiling measured in the same session, before and after the runs
(O_DIRECT random reads of the same sizes: expert runs at queue depth 32,
trunk regions as 64 MiB reads; the mean of both measurements is used),
and wall / max(I/O time, compute time), where I/O time is the bytes a token
reads at the measured ceilings and compute time is the run's s/token minus
the time it was blocked on reads (trunk and experts).
Writes bench/results/stream_bench.csv and a PNG plot (gnuplot).

usage: bench/stream_bench.py [--model DIR] [--pack DIR] [--tokens N]
Needs root for dropping the page cache between runs (skipped otherwise),
and fio (apt-get install fio) for the disk's ceiling.
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")


def run(cmd, **kw):
    print("+ " + " ".join(cmd), file=sys.stderr)
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def drop_caches():
    if os.geteuid() == 0:
        subprocess.run(["sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"])


def reserve_huge_pages(count):
    """Reserves `count` 2 MiB hugetlb pages for fio's --iomem=shmhuge;
    returns the previous setting (to restore), or None when not possible."""
    path = "/proc/sys/vm/nr_hugepages"
    try:
        before = int(open(path).read())
        with open(path, "w") as f:
            f.write(str(before + count))
        if int(open(path).read()) < before + count:
            with open(path, "w") as f:
                f.write(str(before))
            return None
        return before
    except OSError:
        return None


def disk_ceiling(size, qd, files, seconds, huge):
    """fio (Debian's): O_DIRECT io_uring random reads of `size` at `qd`
    spread over `files`; the independent yardstick for the engine's reads.
    The engine reads into 2 MiB pages (io::AlignedBuffer), and on virtio the
    buffer's physical layout decides how many block requests a read becomes
    (docs/streaming.md, "Doctor"), so the ceiling uses huge-page buffers
    too (`huge`); fio's default buffers are measured for reference."""
    out = run(["fio", "--name=ceiling", "--filename=" + ":".join(files),
               "--rw=randread", f"--bs={size}", "--direct=1",
               "--ioengine=io_uring", f"--iodepth={qd}",
               f"--runtime={seconds}", "--time_based",
               "--output-format=json"] +
              (["--iomem=shmhuge"] if huge else [])).stdout
    job = json.loads(out)["jobs"][0]["read"]
    return {"gb_per_s": job["bw_bytes"] / 1e9, "read_size": size,
            "queue_depth": qd}


def measure_ceilings(run_bytes, shards, trunk_file):
    """Huge-page ceilings (expert-sized QD32 and QD1, 64 MiB QD4), or fio's
    default buffers where no hugetlb pages can be reserved."""
    before = reserve_huge_pages(300)  # 600 MiB: 64 MiB x QD4 with room
    huge = before is not None
    if not huge:
        print("warning: no hugetlb pages could be reserved; ceilings use "
              "fio's default buffers", file=sys.stderr)
    try:
        c = {"expert": disk_ceiling(run_bytes, 32, shards, 8, huge),
             "trunk": disk_ceiling(64 << 20, 4, trunk_file, 6, huge),
             "qd1": disk_ceiling(run_bytes, 1, shards, 4, huge)}
    finally:
        if huge:
            with open("/proc/sys/vm/nr_hugepages", "w") as f:
                f.write(str(before))
    pages = "2 MiB" if huge else "default"
    print(f"disk ({pages} pages): expert-sized ({run_bytes} B) random reads "
          f"QD32 {c['expert']['gb_per_s']:.2f} GB/s, QD1 "
          f"{c['qd1']['gb_per_s']:.2f} GB/s; 64 MiB reads QD4 "
          f"{c['trunk']['gb_per_s']:.2f} GB/s")
    return c



def read_expert_table(path):
    """expert_table.bin (shared/pack/expert_table.h): a 24-byte header, then
    88-byte records; only file, offset and length are needed here."""
    data = open(path, "rb").read()
    magic, record, _, count = struct.unpack_from("<8sIIQ", data, 0)
    assert magic == b"FLOTXPT\x01" and record == 88, path
    return [dict(zip(("layer", "expert", "file", "offset", "length"),
                     struct.unpack_from("<iiI4xQQ", data, 24 + 88 * i)))
            for i in range(count)]

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="/work/synth-bench")
    ap.add_argument("--pack", default="")
    ap.add_argument("--tokens", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    args = ap.parse_args()
    pack = args.pack or os.path.join(args.model, "flotilla-pack")
    if not os.path.exists(os.path.join(args.model, "config.json")):
        run([os.path.join(BIN, "flotilla-tool"), "synth", "--preset",
             "k3-bench", "--out", args.model])
    if not os.path.exists(os.path.join(pack, "manifest.json")):
        run([os.path.join(BIN, "flotilla-tool"), "pack", "--model",
             args.model, "--out", pack])
    manifest = json.load(open(os.path.join(pack, "manifest.json")))
    experts = read_expert_table(os.path.join(pack, "expert_table.bin"))
    # fio's block size: the expert run, rounded up to 4 KiB as O_DIRECT reads
    # it.
    run_bytes = -(-max(e["length"] for e in experts) // 4096) * 4096
    shards = sorted({os.path.join(args.model, manifest["expert_files"][e["file"]])
                     for e in experts})

    # The disk's ceilings, in this session.
    drop_caches()
    trunk_file = [os.path.join(pack, "trunk.bin")]
    plain = {"expert": disk_ceiling(run_bytes, 32, shards, 6, False),
             "trunk": disk_ceiling(64 << 20, 4, trunk_file, 6, False)}
    first = measure_ceilings(run_bytes, shards, trunk_file)
    print(f"disk (fio default buffers, for reference): expert-sized QD32 "
          f"{plain['expert']['gb_per_s']:.2f} GB/s; 64 MiB QD4 "
          f"{plain['trunk']['gb_per_s']:.2f} GB/s")

    prompt = ",".join(str(i) for i in range(100, 132))
    configs = [
        # The defaults (lookahead prefetch on), then the same budgets
        # without it, to show what it buys.
        ("1G", ["--mem", "1G"]),
        ("2G", ["--mem", "2G"]),
        ("4G+cache", ["--mem", "4G", "--expert-cache", "1800M"]),
        ("resident", ["--mem", "16G", "--expert-cache", "8G"]),
        ("1G no-pf", ["--mem", "1G", "--expert-prefetch=false"]),
        ("2G no-pf", ["--mem", "2G", "--expert-prefetch=false"]),
        ("4G+c no-pf", ["--mem", "4G", "--expert-cache", "1800M",
                        "--expert-prefetch=false"]),
    ]
    rows = []
    for name, flags in configs:
        drop_caches()
        cmd = [os.path.join(BIN, "flotilla-coordinator"), "generate",
               "--model", args.model, "--pack", pack, "--ids", prompt,
               "--max-tokens", str(args.tokens + 1), "--threads",
               str(args.threads), "--json"] + flags
        out = json.loads(run(cmd).stdout)
        s = out["stats"]
        steps = s["step_seconds"][args.warmup:]
        median = statistics.median(steps)
        trunk_b = s["trunk_bytes_per_token"]
        expert_b = s["expert_bytes_per_token"]
        rows.append(dict(config=name, budget=s["budget_bytes"],
                         pinned=s["pinned_layers"], s_per_token=median,
                         trunk_mb=trunk_b / 1e6, expert_mb=expert_b / 1e6,
                         cache_hits=s["expert_cache_hits_per_token"],
                         prefetch_hits=s["expert_prefetch_hits_per_token"],
                         read_gbps=(trunk_b + expert_b) / median / 1e9,
                         # Time not spent blocked on reads.
                         compute_s=max(0.0, median - s["trunk_wait_s_per_token"]
                                       - s["expert_io_wait_s_per_token"]),
                         peak_rss_gb=s["peak_rss_bytes"] / 1e9,
                         tokens=len(steps)))

    # The disk is shared and its rate drifts over minutes, so the ceilings
    # are measured again after the runs and the mean of both is used.
    drop_caches()
    last = measure_ceilings(run_bytes, shards, trunk_file)
    ceil = {k: (first[k]["gb_per_s"] + last[k]["gb_per_s"]) / 2
            for k in ("expert", "trunk")}
    print(f"ceilings used (mean of before and after): expert-sized QD32 "
          f"{ceil['expert']:.2f} GB/s, 64 MiB QD4 {ceil['trunk']:.2f} GB/s")
    for r in rows:
        # Bytes/token read at the measured ceilings: the I/O-bound floor.
        r["io_floor_s"] = (r["trunk_mb"] * 1e6 / (ceil["trunk"] * 1e9) +
                           r["expert_mb"] * 1e6 / (ceil["expert"] * 1e9))
    print(f"\n{'config':>11} {'pinned':>6} {'s/token':>8} {'trunk MB':>9} "
          f"{'expert MB':>9} {'hits':>5} {'pf hits':>7} {'GB/s':>6} {'of ceil':>7} "
          f"{'compute s':>9} {'wall/max(io,cpu)':>16} {'peak RSS GB':>11}")
    for r in rows:
        of_ceil = r["io_floor_s"] / r["s_per_token"] if r["io_floor_s"] else 0
        r["of_ceiling"] = of_ceil
        r["wall_over_bound"] = r["s_per_token"] / max(r["io_floor_s"],
                                                      r["compute_s"])
        print(f"{r['config']:>11} {r['pinned']:>6} {r['s_per_token']:8.3f} "
              f"{r['trunk_mb']:9.1f} {r['expert_mb']:9.1f} "
              f"{r['cache_hits']:5.1f} {r['prefetch_hits']:7.1f} {r['read_gbps']:6.2f} "
              f"{of_ceil:7.0%} {r['compute_s']:9.3f} {r['wall_over_bound']:16.2f} "
              f"{r['peak_rss_gb']:11.2f}")
    print(f"(median over {rows[0]['tokens']} decode tokens after "
          f"{args.warmup} warm-up; I/O time = bytes/token at the measured "
          f"ceilings; compute time = s/token minus time blocked on reads)")
    os.makedirs(args.out, exist_ok=True)
    csv = os.path.join(args.out, "stream_bench.csv")
    with open(csv, "w") as f:
        keys = list(rows[0].keys())
        f.write(",".join(keys) + "\n")
        for r in rows:
            f.write(",".join(str(r[k]) for k in keys) + "\n")
    png = os.path.join(args.out, "stream_bench.png")
    data = "\n".join(f"{i} {r['s_per_token']} \"{r['config']}\""
                     for i, r in enumerate(rows))
    script = f"""set terminal pngcairo size 900,480
set output '{png}'
set title 'k3-bench: s/token against memory budget'
set ylabel 's/token (median)'
set xlabel 'memory budget'
set style fill solid 0.6
set boxwidth 0.6
set yrange [0:*]
plot '-' using 1:2:xtic(3) with boxes notitle, '' using 1:2:(sprintf('%.3f',$2)) with labels offset 0,1 notitle
{data}
e
{data}
e
"""
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
        print(f"plot: {png}")
    except (FileNotFoundError, subprocess.CalledProcessError) as e:
        print(f"no plot ({e}); apt-get install gnuplot-nox", file=sys.stderr)
    print(f"csv: {csv}")


if __name__ == "__main__":
    main()
