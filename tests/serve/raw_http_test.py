#!/usr/bin/env python3
"""`flotilla-coordinator serve` against raw bytes: issue 30's HTTP items.

Starts serve on the stories model (with an API key, and once more with
--cors-origin) and sends each case as raw bytes on a loopback socket:

  3   a JSON body over 8 KiB with curl -d's form content type is answered
  6   unknown routes, OPTIONS/PUT/DELETE, multipart bodies, bad request
      lines, an oversized body, a long URI: JSON error bodies; an unknown
      /v1 route without the key is 401; GET /v1/models/{id}, /tokenize,
      /detokenize; CORS
  10  gzip and chunked bombs are refused without being decoded (RSS stays)
  11  Range is never applied (no 206, no multipart)
  12  pipelined requests are all answered, in order (API and /metrics)
  9   a second SIGINT during the drain exits at once
  13  conflicting Content-Length, "Host :", HTTP/1.1 without Host, a NUL
      in the Authorization header: 400

usage: raw_http_test.py BIN_DIR MODEL_DIR
Exit 0 pass, 1 fail (every failed check listed).
"""
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from net_util import free_port  # noqa: E402

FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)


def exchange(port, data, timeout=20):
    """Sends `data`, returns every byte until the server closes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out = b""
    try:
        s.sendall(data)
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (socket.timeout, ConnectionResetError, BrokenPipeError):
        pass
    finally:
        s.close()
    return out


def status_of(response):
    try:
        return int(response.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return -1


def json_body(response):
    try:
        return json.loads(response.split(b"\r\n\r\n", 1)[1])
    except (IndexError, ValueError):
        return None


def is_json_error(response):
    body = json_body(response)
    return isinstance(body, dict) and "message" in body.get("error", {})


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def start(binary, model, tmp, name, extra):
    port, metrics = free_port(), free_port()
    log = open(os.path.join(tmp, name + ".log"), "w")
    proc = subprocess.Popen(
        [binary, "serve", "--model", model, "--http-port", str(port),
         "--metrics-port", str(metrics)] + extra,
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"FAIL: serve exited {proc.returncode}: "
                             + open(log.name).read()[-2000:])
        try:
            r = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: t\r\n"
                               b"Connection: close\r\n\r\n", timeout=2)
            if status_of(r) == 200:
                return proc, port, metrics
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("FAIL: serve did not come up")


def main():
    bin_dir, model = sys.argv[1], sys.argv[2]
    binary = os.path.join(bin_dir, "flotilla-coordinator")
    tmp = tempfile.mkdtemp(prefix="flotilla-raw-http-")
    key_file = os.path.join(tmp, "key")
    with open(key_file, "w") as f:
        f.write("k3y\n")
    proc, port, metrics = start(binary, model, tmp, "serve",
                                ["--api-key-file", key_file])
    auth = b"Authorization: Bearer k3y\r\n"
    close = b"Connection: close\r\n"

    def post(path, body, headers=b"Content-Type: application/json\r\n"):
        return exchange(port, b"POST " + path + b" HTTP/1.1\r\nHost: t\r\n"
                        + auth + close + headers + b"Content-Length: "
                        + str(len(body)).encode() + b"\r\n\r\n" + body)

    try:
        # 3: curl -d sends application/x-www-form-urlencoded.
        padded = json.dumps({"prompt": "Once upon a time",
                             "max_tokens": 2}).encode() + b" " * 12000
        r = post(b"/v1/completions", padded,
                 b"Content-Type: application/x-www-form-urlencoded\r\n")
        check(status_of(r) == 200 and json_body(r)["choices"][0]["text"],
              "3: a 12 KB form-typed JSON body is answered 200")

        # 6: error bodies and routes.
        for method in (b"OPTIONS", b"PUT", b"DELETE"):
            r = exchange(port, method + b" /v1/completions HTTP/1.1\r\n"
                         b"Host: t\r\nContent-Length: 0\r\n" + close + b"\r\n")
            check(status_of(r) == 405 and is_json_error(r)
                  and b"Allow: POST" in r,
                  f"6: {method.decode()} /v1/completions is a JSON 405 "
                  "naming POST")
        r = exchange(port, b"GET /nowhere HTTP/1.1\r\nHost: t\r\n" + close
                     + b"\r\n")
        check(status_of(r) == 404 and is_json_error(r),
              "6: an unknown route is a JSON 404")
        r = exchange(port, b"GET /v1/nowhere HTTP/1.1\r\nHost: t\r\n" + close
                     + b"\r\n")
        check(status_of(r) == 401 and is_json_error(r),
              "6: an unknown /v1 route without the key is 401")
        r = post(b"/v1/completions", b"--b\r\nContent-Disposition: form-data;"
                 b" name=\"prompt\"\r\n\r\nhi\r\n--b--\r\n",
                 b"Content-Type: multipart/form-data; boundary=b\r\n")
        check(status_of(r) == 400 and is_json_error(r),
              "6: a multipart body is a JSON 400")
        r = exchange(port, b"GARBAGE\r\n\r\n")
        check(status_of(r) == 400 and is_json_error(r),
              "6: a bad request line is a JSON 400")
        r = exchange(port, b"POST /v1/completions HTTP/1.1\r\nHost: t\r\n"
                     + auth + b"Content-Length: 5000000\r\n\r\n")
        check(status_of(r) == 413 and is_json_error(r),
              "6: a body over the cap is a JSON 413")
        r = exchange(port, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n"
                     b"Host: t\r\n\r\n")
        check(status_of(r) == 431 and is_json_error(r),
              "6: a 20 KB request line is a JSON 431")
        r = exchange(port, b"GET /v1/models/stories260k-moe HTTP/1.1\r\n"
                     b"Host: t\r\n" + auth + close + b"\r\n")
        check(status_of(r) == 200 and json_body(r)["id"] == "stories260k-moe",
              "6: GET /v1/models/{id} names the model")
        r = exchange(port, b"GET /v1/models/other HTTP/1.1\r\nHost: t\r\n"
                     + auth + close + b"\r\n")
        check(status_of(r) == 404 and is_json_error(r),
              "6: GET /v1/models/{another id} is a JSON 404")
        r = post(b"/tokenize", b'{"prompt": "Once upon a time"}')
        tokens = (json_body(r) or {}).get("tokens")
        check(status_of(r) == 200 and tokens == [1, 403, 407, 261, 378],
              f"6: /tokenize gives the completion's prompt ids: {tokens}")
        r = post(b"/detokenize", b'{"tokens": [403, 407, 261, 378]}')
        check(status_of(r) == 200
              and json_body(r)["prompt"] == "Once upon a time",
              "6: /detokenize gives the text back")

        # 10: bombs, refused undecoded.
        before = rss_kb(proc.pid)
        bomb = gzip.compress(b"{" + b" " * 100_000_000 + b"}")
        r = post(b"/v1/completions", bomb,
                 b"Content-Type: application/json\r\n"
                 b"Content-Encoding: gzip\r\n")
        check(status_of(r) == 415 and is_json_error(r),
              f"10: a {len(bomb)} B gzip body (100 MB decoded) is a JSON 415")
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\n" + auth
                  + b"Transfer-Encoding: chunked\r\n\r\n")
        sent = 0
        try:
            while sent < 20_000_000:
                s.sendall(b"10000\r\n" + b" " * 65536 + b"\r\n")
                sent += 65536
        except OSError:
            pass
        r = b""
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                r += b
        except OSError:
            pass
        s.close()
        check(status_of(r) == 413 and sent < 20_000_000,
              f"10: a 20 MB chunked body is refused 413 after {sent} B")
        after = rss_kb(proc.pid)
        check(after - before < 20_000,
              f"10: RSS {before} kB before the bombs, {after} kB after")

        # 11: Range is not applied, on the API or anywhere.
        ranges = b"bytes=0-0" + b",0-" * 2000
        r = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: t\r\nRange: "
                     + ranges + b"\r\n" + close + b"\r\n")
        check(status_of(r) == 200 and len(r) < 1000,
              f"11: Range x2000 on /healthz: {status_of(r)}, {len(r)} B")
        r = post(b"/v1/completions",
                 b'{"prompt": "Once", "max_tokens": 2}',
                 b"Content-Type: application/json\r\nRange: bytes=0-0\r\n")
        check(status_of(r) == 200 and json_body(r) is not None,
              "11: Range on POST /v1/completions: 200 with the whole JSON")

        # 12: pipelining, in order.
        r = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
                     b"GET /readyz HTTP/1.1\r\nHost: t\r\n\r\n"
                     b"GET /healthz HTTP/1.1\r\nHost: t\r\n" + close
                     + b"\r\n")
        check(r.count(b"HTTP/1.1 200 OK") == 3
              and r.find(b"ok\n") < r.find(b'"ready"') < r.rfind(b"ok\n"),
              "12: three pipelined GETs answered in order")
        body = b'{"prompt": "Once", "max_tokens": 2}'
        one = (b"POST /v1/completions HTTP/1.1\r\nHost: t\r\n" + auth
               + b"Content-Length: " + str(len(body)).encode()
               + b"\r\n\r\n" + body)
        r = exchange(port, one + one + one.replace(
            b"Host: t\r\n", b"Host: t\r\n" + close))
        check(r.count(b"HTTP/1.1 200 OK") == 3,
              "12: three pipelined POSTs all answered")
        r = exchange(metrics, b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n"
                     b"GET /metrics HTTP/1.1\r\nHost: t\r\n" + close
                     + b"\r\n")
        check(r.count(b"HTTP/1.1 200 OK") == 2,
              "12: two pipelined /metrics scrapes answered")

        # 13: strict parsing. A body that is a good request under the first
        # Content-Length is refused for the second (a proxy may use it).
        good = b'{"prompt": "Once", "max_tokens": 1}'
        n = str(len(good)).encode()
        for what, req in [
                ("conflicting Content-Length",
                 b"POST /v1/completions HTTP/1.1\r\nHost: t\r\n" + auth
                 + b"Content-Length: " + n + b"\r\nContent-Length: 9" + n
                 + b"\r\n\r\n" + good),
                ("'Host :'", b"GET /healthz HTTP/1.1\r\nHost : t\r\n\r\n"),
                ("HTTP/1.1 without Host", b"GET /healthz HTTP/1.1\r\n\r\n"),
                ("a NUL in Authorization",
                 b"GET /v1/models HTTP/1.1\r\nHost: t\r\n"
                 b"Authorization: Bearer k3y\x00junk\r\n\r\n")]:
            r = exchange(port, req)
            check(status_of(r) == 400 and is_json_error(r),
                  f"13: {what} is a JSON 400")
    finally:
        proc.terminate()
        proc.wait(timeout=60)

    # CORS, on a server that allows one origin.
    proc, port, _ = start(binary, model, tmp, "cors",
                          ["--cors-origin", "https://app.example"])
    try:
        r = exchange(port, b"OPTIONS /v1/chat/completions HTTP/1.1\r\n"
                     b"Host: t\r\nOrigin: https://app.example\r\n"
                     b"Access-Control-Request-Method: POST\r\n" + close
                     + b"\r\n")
        check(status_of(r) == 204
              and b"Access-Control-Allow-Origin: https://app.example" in r
              and b"Access-Control-Allow-Headers: Authorization" in r,
              "6: --cors-origin answers the preflight")
        r = exchange(port, b"GET /v1/models HTTP/1.1\r\nHost: t\r\n" + close
                     + b"\r\n")
        check(b"Access-Control-Allow-Origin: https://app.example" in r,
              "6: --cors-origin marks every answer")
        # Issue 44 item 5: a "simple" cross-origin POST (no preflight) from
        # any other page is refused; the allowed origin, the server's own
        # and clients without Origin are served.
        good = b'{"prompt": "Once", "max_tokens": 1}'
        n = str(len(good)).encode()
        for ctype in (b"text/plain", b"application/x-www-form-urlencoded",
                      b"multipart/form-data; boundary=x"):
            def post(origin):
                return exchange(port, b"POST /v1/completions HTTP/1.1\r\n"
                                b"Host: 127.0.0.1:1\r\n" + origin
                                + b"Content-Type: " + ctype
                                + b"\r\nContent-Length: " + n + b"\r\n"
                                + close + b"\r\n" + good)
            r = post(b"Origin: http://evil.example\r\n")
            check(status_of(r) == 403 and is_json_error(r)
                  and b"http://evil.example" in r,
                  "44.5: a foreign page's simple POST is a JSON 403")
            for origin in (b"", b"Origin: https://app.example\r\n",
                           b"Origin: http://127.0.0.1:1\r\n"):
                check(status_of(post(origin)) == 200,
                      "44.5: no Origin, the allowed one or the server's own "
                      "is served")
    finally:
        proc.terminate()
        proc.wait(timeout=60)

    # 9: a second SIGINT during the drain exits at once (130). The drain is
    # held by 60 accepted requests run one at a time (--max-batch 1): about
    # 8 s of work here, far more than the second between the signals.
    proc, port, _ = start(binary, model, tmp, "drain",
                          ["--max-batch", "1", "--max-queue", "64"])
    try:
        body = json.dumps({"prompt": "Once", "max_tokens": 400,
                           "ignore_eos": True}).encode()
        held = []
        for _ in range(60):
            s = socket.create_connection(("127.0.0.1", port), timeout=60)
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\n"
                      b"Content-Length: " + str(len(body)).encode()
                      + b"\r\n\r\n" + body)
            held.append(s)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        drained_alone = proc.poll()
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            code = None
        check(drained_alone is None and code == 130,
              f"9: still draining after a SIGINT ({drained_alone}); a second "
              f"one exits {code}")
        for s in held:
            s.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    if FAILURES:
        print(f"{len(FAILURES)} checks failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
