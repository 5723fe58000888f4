#!/usr/bin/env python3
"""Records what Claude Code and Codex send (tests/agents/requests/*.json)
for replay_requests_test.py, which needs no Node. Runs both CLIs through a
recording proxy in front of `serve` on the agent test model, then keeps
each request body with the clients' own prose replaced by filler of the
same length: every string longer than 24 characters, and every text,
description and instructions field, becomes lorem ipsum (so the token
counts stay close); keys, roles, types, tool names, schema structure and
sizes are kept.

  tests/agents/capture_requests.py BUILD/bin/flotilla-coordinator
"""
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import agent_clis_test as clis  # noqa: E402

FILLER = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do "
PROSE_KEYS = {"text", "description", "instructions", "content", "output",
              "system"}


def fill(s):
    return (FILLER * (len(s) // len(FILLER) + 1))[:len(s)]


def scrub(value, key=""):
    if isinstance(value, dict):
        return {k: scrub(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, key) for v in value]
    if isinstance(value, str) and (len(value) > 24 or key in PROSE_KEYS):
        return fill(value)
    return value


def main():
    binary = sys.argv[1]
    scratch = tempfile.mkdtemp(prefix="flotilla-capture-")
    recorded = []
    try:
        model = os.path.join(scratch, "model")
        clis.make_model(model)
        server, port = clis.start_serve(binary, model)

        class Proxy(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                recorded.append((self.path, json.loads(body)))
                req = urllib.request.Request(
                    f"http://127.0.0.1:{port}{self.path}", data=body,
                    headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=600) as r:
                        status, data = r.status, r.read()
                        kind = r.headers.get("Content-Type", "")
                except urllib.error.HTTPError as e:
                    status, data, kind = e.code, e.read(), "application/json"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self.send_response(404)
                self.end_headers()

            def log_message(self, *args):
                pass

        proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        proxy_port = proxy.server_address[1]
        home, work = os.path.join(scratch, "home"), os.path.join(scratch, "w")
        os.makedirs(os.path.join(home, ".codex"))
        os.makedirs(work)
        with open(os.path.join(home, ".codex", "config.toml"), "w") as f:
            f.write(f'model = "flotilla"\nmodel_provider = "flotilla"\n\n'
                    f'[model_providers.flotilla]\nname = "flotilla"\n'
                    f'base_url = "http://127.0.0.1:{proxy_port}/v1"\n'
                    f'wire_api = "responses"\nenv_key = "FLOTILLA_KEY"\n')
        env = dict(os.environ, HOME=home, DISABLE_TELEMETRY="1",
                   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                   ANTHROPIC_BASE_URL=f"http://127.0.0.1:{proxy_port}",
                   ANTHROPIC_API_KEY="any", FLOTILLA_KEY="any")
        for cmd in ([os.path.join(clis.BIN, "codex"), "exec",
                     "--skip-git-repo-check", "List the files in this folder."],
                    [os.path.join(clis.BIN, "claude"), "-p",
                     "List the files in this folder.", "--output-format",
                     "json"]):
            subprocess.run(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=600)
        proxy.shutdown()
        server.terminate()
        server.wait(timeout=120)
        out = os.path.join(HERE, "requests")
        os.makedirs(out, exist_ok=True)
        for i, (path, body) in enumerate(recorded):
            client = "codex" if path.endswith("/responses") else "claude_code"
            name = os.path.join(out, f"{client}_{i}.json")
            with open(name, "w") as f:
                json.dump({"path": path, "body": scrub(body)}, f, indent=1)
                f.write("\n")
            print(f"{name}: {path}, {len(json.dumps(body))} bytes")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
