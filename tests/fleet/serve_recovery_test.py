#!/usr/bin/env python3
"""`serve` over two expert workers with no replicas (R=1) loses one and gets
it back, and never goes down itself (issue 18).

  1. serve answers a completion over both workers; /readyz is 200.
  2. worker 1 is killed (SIGKILL) while serve is idle: /readyz turns 503
     and names the (layer, expert) pairs without a live worker, with no
     request sent (the health thread); a completion answers 503 naming the
     missing experts, at once; serve is still running; serve's gRPC
     health says NOT_SERVING (`flotilla-coordinator health`).
  3. worker 1 is restarted on its port: /readyz is 200 again and the same
     completion gives the same text as in 1.
  4. `generate --json` lists each worker's RPC counters; with one of the
     two workers down it fails with UNAVAILABLE
     naming the missing experts, without waiting for a connect timeout.

usage: serve_recovery_test.py BIN_DIR MODEL_DIR
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from net_util import free_port  # noqa: E402


def request(url, body=None, timeout=30):
    """(status, parsed JSON body) of a GET, or a POST when body is given."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def wait_for(what, probe, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok: {what}")


class Worker:
    def __init__(self, binary, model, k, log, port=0):
        self.log = log
        self.proc = subprocess.Popen(
            [binary, "--model", model, "--shard", f"{k}/2", "--host",
             "127.0.0.1", "--port", str(port), "--threads", "1"],
            stdout=open(log, "w"), stderr=subprocess.STDOUT)
        line = wait_for(f"worker {k} listening", self.listening, 60)
        self.port = int(line)

    def listening(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"worker exited: {open(self.log).read()}")
        m = re.search(r"listening on [0-9.]+:([0-9]+)", open(self.log).read())
        return m.group(1) if m else None

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def main():
    bin_dir, model = sys.argv[1], sys.argv[2]
    worker_bin = os.path.join(bin_dir, "flotilla-expert-worker")
    coord = os.path.join(bin_dir, "flotilla-coordinator")
    tmp = tempfile.mkdtemp(prefix="flotilla-recovery-")
    workers = [Worker(worker_bin, model, k, f"{tmp}/w{k}.log") for k in (0, 1)]
    addresses = ",".join(f"127.0.0.1:{w.port}" for w in workers)
    http = free_port()
    grpc_port = free_port()
    serve_log = f"{tmp}/serve.log"
    serve = subprocess.Popen(
        [coord, "serve", "--model", model, "--workers", addresses,
         "--host", "127.0.0.1", "--http-port", str(http), "--threads", "1",
         "--grpc-port", str(grpc_port), "--worker-health-interval-ms", "200"],
        stdout=open(serve_log, "w"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{http}"

    def health():
        """serve's gRPC health, through `flotilla-coordinator health`."""
        r = subprocess.run([coord, "health", "--address",
                            f"127.0.0.1:{grpc_port}"],
                           capture_output=True, text=True, timeout=30)
        return r.stdout.strip()
    completion = {"model": "m", "prompt": "Once upon a time", "max_tokens": 12,
                  "temperature": 0}
    try:
        def ready():
            if serve.poll() is not None:
                raise AssertionError(f"serve exited: {open(serve_log).read()}")
            try:
                return request(f"{base}/readyz", timeout=2)
            except OSError:
                return None
        status, body = wait_for("serve up", ready, 60)
        check(status == 200 and body["ready"], "/readyz 200 with both workers")
        wait_for("gRPC health SERVING", lambda: health() == "SERVING", 10)
        print("ok: gRPC health SERVING")
        completion["model"] = request(f"{base}/v1/models")[1]["data"][0]["id"]
        status, first = request(f"{base}/v1/completions", completion)
        check(status == 200, "a completion over both workers")
        text = first["choices"][0]["text"]
        check(len(text) > 0, f"it has text: {text!r}")

        # 2. A worker dies while serve is idle.
        workers[1].kill()
        killed = time.monotonic()
        status, body = wait_for(
            "/readyz 503", lambda: (lambda r: r if r[0] == 503 else None)(
                request(f"{base}/readyz")), 10)
        print(f"/readyz turned 503 {time.monotonic() - killed:.2f} s after "
              "the kill, with no request sent")
        check("missing_experts" in body and
              re.search(r"\d+ \(layer, expert\) pairs have no live worker "
                        r"\(layer \d+ experts", body["missing_experts"]),
              f"/readyz names the missing experts: {body.get('missing_experts')}")
        asked = time.monotonic()
        status, err = request(f"{base}/v1/completions", completion)
        took = time.monotonic() - asked
        print(f"completion with an expert missing answered in {took:.2f} s")
        check(status == 503, f"the completion answers 503 (got {status})")
        message = err["error"]["message"]
        check("UNAVAILABLE" in message and
              "no live expert worker holds expert" in message and
              f"127.0.0.1:{workers[1].port}" in message,
              f"naming the missing experts and worker: {message[:160]}")
        check(took < 5, "without waiting for an RPC deadline")
        check(serve.poll() is None, "serve is still running")
        wait_for("gRPC health NOT_SERVING",
                 lambda: health() == "NOT_SERVING", 10)
        print("ok: gRPC health NOT_SERVING")

        # 3. The worker comes back on its port.
        workers[1] = Worker(worker_bin, model, 1, f"{tmp}/w1-again.log",
                            workers[1].port)
        back = time.monotonic()
        wait_for("/readyz 200 again",
                 lambda: request(f"{base}/readyz")[0] == 200, 10)
        print(f"/readyz 200 again {time.monotonic() - back:.2f} s after the "
              "restart")
        status, again = request(f"{base}/v1/completions", completion)
        check(status == 200, "a completion after the restart")
        check(again["choices"][0]["text"] == text,
              "the same text as before the kill")
        wait_for("gRPC health SERVING again", lambda: health() == "SERVING",
                 10)
        print("ok: gRPC health SERVING again")
        check("is back after" in open(serve_log).read(),
              "serve's log says the worker is back")

        # generate --json reports each worker's RPC counters.
        run = subprocess.run(
            [coord, "generate", "--model", model, "--workers", addresses,
             "--prompt", "Once upon a time", "--max-tokens", "4", "--json"],
            capture_output=True, text=True, timeout=60)
        check(run.returncode == 0, f"generate over both: {run.stderr[-300:]}")
        per_worker = json.loads(run.stdout)["stats"]["remote"]["workers"]
        check([w["address"] for w in per_worker] == addresses.split(",") and
              all(w["up"] and w["compute_calls"] > 0 and
                  w["compute_failed"] == 0 for w in per_worker),
              f"stats.remote.workers has both, with calls: {per_worker}")

        # 4. generate with a worker down: no connect wait.
        workers[1].kill()
        started = time.monotonic()
        run = subprocess.run(
            [coord, "generate", "--model", model, "--workers", addresses,
             "--prompt", "Once upon a time", "--max-tokens", "4"],
            capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
        print(f"generate with worker 1 down exited {run.returncode} after "
              f"{took:.2f} s")
        check(run.returncode == 1, "generate fails")
        check("UNAVAILABLE" in run.stderr and
              "pairs have no live worker" in run.stderr and
              "--connect-timeout-ms" in run.stderr,
              f"naming the missing experts: {run.stderr.strip()[:200]}")
        check(took < 10, "well before the old 30 s connect wait")
    finally:
        if serve.poll() is None:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(30)
            except subprocess.TimeoutExpired:
                serve.kill()
        for w in workers:
            if w.proc.poll() is None:
                w.kill()
        print("serve log:\n" + open(serve_log).read()[-2000:])
    print("PASS")


if __name__ == "__main__":
    main()
