#!/usr/bin/env python3
"""Issue 46: the requests Claude Code and Codex send (recorded by
capture_requests.py: their real shapes, fields, roles, block and tool
types, schema structure and sizes, their prose replaced by filler of the
same length) replayed against `serve` with no context flags, as the
clients send them, streamed. Needs no Node. Each must be answered 200 with
the stream's own ending (message_stop; response.completed), and the
second Claude Code request, which repeats the first's conversation, must
resume from the prefix cache.

  tests/agents/replay_requests_test.py BUILD/bin/flotilla-coordinator
"""
import glob
import json
import os
import shutil
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import agent_clis_test as clis  # noqa: E402


def events(raw):
    """The data payloads of a server-sent event stream, parsed."""
    out = []
    for line in raw.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[6:]))
    return out


def main():
    binary = sys.argv[1]
    scratch = tempfile.mkdtemp(prefix="flotilla-replay-")
    server = None
    try:
        model = os.path.join(scratch, "model")
        clis.make_model(model)
        server, port = clis.start_serve(binary, model)
        files = sorted(glob.glob(os.path.join(HERE, "requests", "*.json")))
        clis.check(len(files) >= 3, f"{len(files)} recorded requests")
        cached = {}
        for name in files:
            recorded = json.load(open(name))
            body = recorded["body"]
            req = urllib.request.Request(
                f"http://127.0.0.1:{port}{recorded['path']}",
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json",
                         "x-api-key": "any"})
            with urllib.request.urlopen(req, timeout=600) as r:
                status, raw = r.status, r.read()
            got = events(raw) if body.get("stream") else [json.loads(raw)]
            last = got[-1] if got else {}
            short = os.path.basename(name)
            if recorded["path"].startswith("/v1/responses"):
                ok = status == 200 and last.get("type") == "response.completed"
                usage = last.get("response", {}).get("usage", {})
                cached[short] = usage.get("input_tokens_details", {}).get(
                    "cached_tokens", 0)
            else:
                ok = status == 200 and last.get("type") == "message_stop"
                delta = [e for e in got if e.get("type") == "message_delta"]
                usage = delta[-1]["usage"] if delta else {}
                cached[short] = usage.get("cache_read_input_tokens", 0)
            clis.check(ok, f"{short}: {recorded['path']} answered "
                           f"{status}, ending {last.get('type')}",
                       raw[-800:].decode(errors="replace"))
        claude = sorted(k for k in cached if k.startswith("claude_code"))
        clis.check(len(claude) >= 2 and cached[claude[1]] > 0,
                   f"Claude Code's second request resumed from the prefix "
                   f"cache: {cached}")
    finally:
        if server is not None and server.poll() is None:
            server.terminate()
            server.wait(timeout=120)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
