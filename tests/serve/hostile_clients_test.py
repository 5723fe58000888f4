#!/usr/bin/env python3
"""serve under hostile clients, bounded (it stops by itself in ~30 s).

While a client streams greedy completions from `serve` on the stories
model, 64 sockets trickle request headers a byte a second, and gzip
(100 MB decoded) and chunked (20 MB) bombs are sent over and over. Then:

  * each streamed text equals the solo run's (before the attack);
  * /healthz, polled every 0.1 s on new connections, always answered 200
    (the latencies are printed; the bound checked is a loose 3 s, so a
    loaded 2-core machine does not fail it: the figure is the report);
  * every slow socket was closed by the server's header deadline (10 s)
    instead of holding its thread;
  * the server's peak RSS (VmHWM) stayed within the memory plan's "used"
    figure plus an allowance of 64 MiB (the connection threads' stacks
    and buffers, which the plan does not charge).

usage: hostile_clients_test.py BIN_DIR MODEL_DIR
"""
import gzip
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from net_util import free_port  # noqa: E402

ALLOWANCE_MIB = 64
SLOW_SOCKETS = 64
ATTACK_S = 14  # past the 10 s header deadline, so every slow socket meets it


def stream_text(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", json.dumps({
        "prompt": "Once upon a time", "max_tokens": 200, "temperature": 0,
        "stream": True}), {"Content-Type": "application/json"})
    r = c.getresponse()
    text = ""
    for line in r.read().decode().split("\n"):
        if line.startswith("data: {"):
            text += json.loads(line[6:])["choices"][0]["text"]
    c.close()
    return r.status, text


def slow_socket(port, stop, closed_by_server):
    """Trickles a header a byte a second; reconnects when closed."""
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ")
            s.settimeout(1.0)
            while not stop.is_set():
                try:
                    if s.recv(4096) == b"":
                        break
                    closed_by_server.append(1)  # an answer (408)
                    break
                except socket.timeout:
                    s.sendall(b"a")
            s.close()
        except OSError:
            time.sleep(0.1)


def bomb(port, stop, kind, answers):
    gz = gzip.compress(b"{" + b" " * 100_000_000 + b"}")
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            if kind == "gzip":
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\n"
                          b"Content-Encoding: gzip\r\nContent-Length: "
                          + str(len(gz)).encode() + b"\r\n\r\n" + gz)
            else:
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\n")
                for _ in range(320):  # 20 MB
                    s.sendall(b"10000\r\n" + b" " * 65536 + b"\r\n")
            answers.append(s.recv(64)[:12])
            s.close()
        except OSError:
            answers.append(b"reset")
        time.sleep(0.05)


def health_poller(port, stop, latencies, failures):
    while not stop.is_set():
        t = time.time()
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/healthz")
            ok = c.getresponse().status == 200
            c.close()
        except OSError:
            ok = False
        latencies.append(time.time() - t)
        if not ok:
            failures.append(t)
        time.sleep(0.1)


def main():
    binary = os.path.join(sys.argv[1], "flotilla-coordinator")
    model = sys.argv[2]
    # AddressSanitizer / ThreadSanitizer builds pass --sanitized.
    sanitized = "--sanitized" in sys.argv[3:]
    tmp = tempfile.mkdtemp(prefix="flotilla-hostile-")
    port = free_port()
    log_path = os.path.join(tmp, "serve.log")
    proc = subprocess.Popen(
        [binary, "serve", "--model", model, "--http-port", str(port)],
        stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    failures = []
    try:
        deadline = time.time() + 60
        while True:
            try:
                if stream_text(port)[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit("FAIL: serve did not come up:\n"
                                 + open(log_path).read()[-2000:])
            time.sleep(0.2)
        status, solo = stream_text(port)
        print(f"solo: {status}, {len(solo)} characters")

        stop = threading.Event()
        closed, answers, latencies, down = [], [], [], []
        threads = [threading.Thread(target=slow_socket,
                                    args=(port, stop, closed))
                   for _ in range(SLOW_SOCKETS)]
        threads += [threading.Thread(target=bomb,
                                     args=(port, stop, k, answers))
                    for k in ("gzip", "chunked")]
        threads.append(threading.Thread(
            target=health_poller, args=(port, stop, latencies, down)))
        for t in threads:
            t.start()
        started = time.time()
        streams = []
        while time.time() - started < ATTACK_S:
            streams.append(stream_text(port))
        stop.set()
        for t in threads:
            t.join(timeout=40)

        with open(f"/proc/{proc.pid}/status") as f:
            hwm_kb = int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1))
        used = re.search(r"^used\s+([\d.]+)", open(log_path).read(), re.M)
        used_mib = float(used.group(1)) if used else 0.0
        lat = sorted(latencies)
        print(f"streams during the attack: {len(streams)}; "
              f"bomb answers: {len(answers)} "
              f"({sorted(set(a.decode(errors='replace') for a in answers))});"
              f" slow sockets closed by the server: {len(closed)}")
        print(f"/healthz: {len(lat)} polls, {len(down)} failed, median "
              f"{lat[len(lat) // 2] * 1e3:.1f} ms, max {lat[-1] * 1e3:.1f} ms")
        print(f"peak RSS {hwm_kb / 1024:.1f} MiB; plan used {used_mib} MiB "
              f"+ allowance {ALLOWANCE_MIB} MiB")

        bad = [i for i, (s, t) in enumerate(streams) if s != 200 or t != solo]
        if not streams or bad:
            failures.append(f"streams unlike the solo run: {bad} of "
                            f"{len(streams)}")
        if down:
            failures.append(f"/healthz failed {len(down)} times")
        if not lat or lat[-1] > 3.0:
            failures.append("/healthz took over 3 s")
        if len(closed) < SLOW_SOCKETS:
            failures.append(f"only {len(closed)} of {SLOW_SOCKETS} slow "
                            "sockets were closed by the server")
        if not answers:
            failures.append("no bomb was answered")
        if sanitized:
            print("RSS not checked (sanitizer build: shadow memory and "
                  "quarantine make it unrelated to the plan)")
        elif not used or hwm_kb / 1024 > used_mib + ALLOWANCE_MIB:
            failures.append("peak RSS over the plan's used + allowance")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
