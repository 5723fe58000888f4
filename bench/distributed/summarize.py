#!/usr/bin/env python3
"""Prints the table of bench/distributed/run.sh results (results.jsonl)."""
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
base = None
for r in rows:
    if r["config"].startswith("N=1 R=1 throttled"):
        base = r["result"]["expert_s_per_token"]
print(f"{'config':<34} {'expert s/tok':>12} {'speed-up':>9} {'target':>7} "
      f"{'rpc ms/layer':>12} {'p50':>6} {'calls/layer':>11} {'wire KB/tok':>11} "
      f"{'read MB/tok':>11} {'even-disks':>10}")
for r in rows:
    x = r["result"]
    n = x["workers"]
    throttled = "unthrottled" not in r["config"]
    speed = base / x["expert_s_per_token"] if base and throttled else None
    print(f"{r['config']:<34} {x['expert_s_per_token']:>12.4f} "
          f"{(f'{speed:.2f}x' if speed else '-'):>9} "
          f"{(f'{0.85 * n:.2f}x' if throttled else '-'):>7} "
          f"{x['rpc_overhead_ms_per_layer']:>12.3f} "
          f"{x.get('rpc_overhead_ms_p50', 0):>6.3f} "
          f"{x['calls_per_layer']:>11.2f} "
          f"{x['wire_bytes_per_token'] / 1e3:>11.1f} "
          f"{x['expert_bytes_read_per_token'] / 1e6:>11.1f} "
          f"{x.get('even_disks_speedup', 0):>9.2f}x")
ids = {json.dumps(r["result"]["ids"]) for r in rows}
print("generated ids identical across configs:", len(ids) == 1)
