#!/usr/bin/env python3
"""Issue 46: the coding agents people run, as they run: Claude Code
(`claude -p ... --output-format json`, Anthropic's Messages API) and Codex
(`codex exec`, a provider with wire_api = "responses") each complete a
headless turn against `flotilla-coordinator serve --model M` started with no
context flags.

M is Qwen3-MoE-shaped and synthetic (bench/synth_moe.py: hidden 64, 2
layers, 65,536 positions, the stories tokenizer), made to answer at once
with its end of text (ends=2), so each client sees its reply end; the
clients send their real system prompts and tool lists (18k and 32k
tokens here). Checked: both exit 0; Claude Code's JSON result is not an
error; its second request resumes from the first one's state (its usage
reports cache_read_input_tokens); the server answered 200 on both APIs.

  tests/agents/agent_clis_test.py BUILD/bin/flotilla-coordinator

Needs tests/agents/node_modules (npm ci --prefix tests/agents, ~830 MB).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from net_util import free_port  # noqa: E402

BIN = os.path.join(ROOT, "tests", "agents", "node_modules", ".bin")


def check(ok, what, detail=""):
    print(("ok - " if ok else "FAILED: ") + what, flush=True)
    if not ok:
        print(detail, flush=True)
        raise SystemExit(1)


def make_model(folder):
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "synth_moe.py"),
                    "qwen3_moe", folder, "hidden=64", "layers=2", "heads=2",
                    "kv_heads=1", "head_dim=32", "experts=4", "moe_inter=64",
                    "vocab=512", "max_pos=65536", "ends=2"],
                   check=True, stdout=subprocess.DEVNULL)
    stories = os.path.join(ROOT, "models", "stories260k-moe")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(stories, name), folder)


def start_serve(binary, model, log=subprocess.DEVNULL):
    """`serve` on the agent model with no context flags: (process, port),
    once it is ready."""
    port = free_port()
    server = subprocess.Popen(
        [binary, "serve", "--model", model, "--http-port", str(port),
         "--chat-template", "chatml"], stdout=log, stderr=subprocess.STDOUT)
    wait_ready(port, server)
    return server, port


def wait_ready(port, server):
    for _ in range(600):
        if server.poll() is not None:
            raise SystemExit(f"serve exited {server.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz",
                                        timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("serve did not become ready")


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: agent_clis_test.py COORDINATOR_BINARY")
    binary = sys.argv[1]
    scratch = tempfile.mkdtemp(prefix="flotilla-agents-")
    server = None
    try:
        model = os.path.join(scratch, "model")
        make_model(model)
        log = open(os.path.join(scratch, "serve.log"), "w")
        # No context flags: the context is the model's (65,536 positions).
        server, port = start_serve(binary, model, log)
        home = os.path.join(scratch, "home")
        work = os.path.join(scratch, "work")
        os.makedirs(os.path.join(home, ".codex"))
        os.makedirs(work)
        env = dict(os.environ, HOME=home, DISABLE_TELEMETRY="1",
                   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                   ANTHROPIC_BASE_URL=f"http://127.0.0.1:{port}",
                   ANTHROPIC_API_KEY="any", FLOTILLA_KEY="any")
        with open(os.path.join(home, ".codex", "config.toml"), "w") as f:
            f.write(f'''model = "flotilla"
model_provider = "flotilla"

[model_providers.flotilla]
name = "flotilla"
base_url = "http://127.0.0.1:{port}/v1"
wire_api = "responses"
env_key = "FLOTILLA_KEY"
''')
        codex = subprocess.run(
            [os.path.join(BIN, "codex"), "exec", "--skip-git-repo-check",
             "List the files in this folder."],
            cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=600)
        check(codex.returncode == 0,
              f"codex exec exits 0 (got {codex.returncode})",
              codex.stdout[-1500:] + codex.stderr[-1500:])
        claude = subprocess.run(
            [os.path.join(BIN, "claude"), "-p", "List the files in this folder.",
             "--output-format", "json"],
            cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=600)
        check(claude.returncode == 0,
              f"claude -p exits 0 (got {claude.returncode})",
              claude.stdout[-1500:] + claude.stderr[-1500:])
        result = json.loads(claude.stdout)
        check(result.get("is_error") is False and
              result.get("subtype") == "success",
              "Claude Code's JSON result is not an error: " +
              json.dumps({k: result.get(k) for k in
                          ("is_error", "subtype", "terminal_reason")}))
        usage = result.get("usage", {})
        check(usage.get("cache_read_input_tokens", 0) > 0,
              "Claude Code's next request resumed from the prefix cache: "
              f"cache_read_input_tokens {usage.get('cache_read_input_tokens')}")
        server.terminate()
        server.wait(timeout=120)
        log.close()
        lines = open(os.path.join(scratch, "serve.log")).read().splitlines()
        for api in ("responses", "messages"):
            answered = [l for l in lines if f"api={api}" in l]
            check(answered and all("status=200" in l for l in answered),
                  f"every {api} request was answered 200 "
                  f"({len(answered)} requests)", "\n".join(lines[-20:]))
    finally:
        if server is not None and server.poll() is None:
            server.kill()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
