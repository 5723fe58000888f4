#!/usr/bin/env python3
"""Debian's real Prometheus scrapes a coordinator and two expert workers.

Starts two expert workers (each on its own `flotilla-tool pack --workers`
folder of the stories model), `flotilla-coordinator serve` over them with
its trunk layers streamed from the pack (--max-pinned-layers 0), and a
`flotilla-coordinator generate --stats --json` run over the same workers,
every one with --metrics-port, and a Prometheus server on loopback scraping
them every second. While a chat completion and the generation run, then:

  * every target is up in Prometheus;
  * every PromQL expression in dashboards/*.json returns data through
    Prometheus's HTTP API ($__rate_interval read as 1m);
  * the bytes read per decoded token that Prometheus reports for the
    generate run equal the --stats figures that run printed, exactly.

usage: prometheus_test.py BIN_DIR MODEL_DIR DASHBOARDS_DIR
Exit 0 pass, 1 fail.
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from net_util import free_port  # noqa: E402


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def wait_for(what, probe, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if probe():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"FAIL: {what} not ready within {timeout} s")


class Procs:
    def __init__(self, tmp):
        self.tmp, self.procs = tmp, []

    def start(self, name, args):
        log = open(os.path.join(self.tmp, name + ".log"), "w")
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append((name, p))
        return p

    def stop(self):
        for _, p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for _, p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()

    def log(self, name):
        with open(os.path.join(self.tmp, name + ".log")) as f:
            return f.read()


def query(prom, expr):
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        body = json.loads(get(url))
    except urllib.error.HTTPError as e:
        return None, e.read().decode()
    if body.get("status") != "success":
        return None, json.dumps(body)
    return body["data"]["result"], None


def dashboard_exprs(folder):
    exprs = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            dash = json.load(f)
        for panel in dash.get("panels", []):
            for target in panel.get("targets", []):
                if target.get("expr"):
                    exprs.append((os.path.basename(path), panel["title"],
                                  target["expr"]))
    return exprs


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    bin_dir, model, dashboards = sys.argv[1:]
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        raise SystemExit("FAIL: Debian's prometheus is not installed "
                         "(scripts/setup.sh --tests installs it)")
    started = time.time()
    tmp = tempfile.mkdtemp(prefix="flotilla-prom-")
    procs = Procs(tmp)
    try:
        run(bin_dir, model, dashboards, prometheus, tmp, procs)
    finally:
        procs.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"prometheus test: passed in {time.time() - started:.1f} s")


def run(bin_dir, model, dashboards, prometheus, tmp, procs):
    tool = os.path.join(bin_dir, "flotilla-tool")
    worker = os.path.join(bin_dir, "flotilla-expert-worker")
    coord = os.path.join(bin_dir, "flotilla-coordinator")
    pack = os.path.join(tmp, "pack")
    subprocess.run([tool, "pack", "--model", model, "--out", pack,
                    "--workers", "2"], check=True, stdout=subprocess.DEVNULL)

    grpc = [free_port() for _ in range(2)]
    metrics = {name: free_port()
               for name in ("worker0", "worker1", "serve", "generate")}
    for k in range(2):
        folder = os.path.join(pack, "workers", f"worker-{k}")
        procs.start(f"worker{k}", [
            worker, "--model", folder, "--placement",
            os.path.join(folder, "placement.json"), "--host", "127.0.0.1",
            "--port", str(grpc[k]), "--threads", "1",
            "--metrics-port", str(metrics[f"worker{k}"])])
    workers = ",".join(f"127.0.0.1:{p}" for p in grpc)
    http = free_port()
    procs.start("serve", [
        coord, "serve", "--model", model, "--workers", workers,
        "--connect-timeout-ms", "30000",
        "--pack", pack, "--max-pinned-layers", "0",
        "--host", "127.0.0.1", "--http-port", str(http), "--threads", "1",
        "--metrics-port", str(metrics["serve"])])

    prom_port = free_port()
    config = os.path.join(tmp, "prometheus.yml")
    with open(config, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                "scrape_configs:\n")
        for job, names in (("coordinator", ["serve"]),
                           ("workers", ["worker0", "worker1"]),
                           ("generate", ["generate"])):
            targets = ", ".join(f"'127.0.0.1:{metrics[n]}'" for n in names)
            f.write(f"  - job_name: {job}\n"
                    f"    static_configs:\n      - targets: [{targets}]\n")
    procs.start("prometheus", [
        prometheus, f"--config.file={config}",
        f"--storage.tsdb.path={os.path.join(tmp, 'tsdb')}",
        f"--web.listen-address=127.0.0.1:{prom_port}"])
    prom = f"http://127.0.0.1:{prom_port}"
    wait_for("prometheus", lambda: "Ready" in get(f"{prom}/-/ready"))
    wait_for("serve", lambda: get(f"http://127.0.0.1:{http}/readyz") != "")

    def scraped(job_names):
        active = json.loads(get(f"{prom}/api/v1/targets"))["data"][
            "activeTargets"]
        return all(t["health"] == "up" for t in active
                   if t["labels"]["job"] in job_names) and any(
                       t["labels"]["job"] in job_names for t in active)
    # Scraped once before any request, so rates see the increase.
    wait_for("first scrapes", lambda: scraped({"coordinator", "workers"}))

    # A chat completion through the coordinator while Prometheus scrapes.
    request = urllib.request.Request(
        f"http://127.0.0.1:{http}/v1/chat/completions",
        data=json.dumps({"model": "stories260k-moe", "max_tokens": 200,
                         "messages": [{"role": "user",
                                       "content": "Once upon a time"}]}
                        ).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as r:
        chat = json.loads(r.read())
    print("chat:", chat["usage"])

    # The generate run, its /metrics kept up after it so that the last
    # scrape sees the final counts.
    out = os.path.join(tmp, "generate.json")
    with open(out, "w") as stdout:
        gen = subprocess.Popen([
            coord, "generate", "--model", model, "--workers", workers,
            "--pack", pack, "--max-pinned-layers", "0",
            "--prompt", "Once upon a time", "--max-tokens", "300",
            "--threads", "1", "--json", "--stats", "--ignore-eos",
            "--metrics-port", str(metrics["generate"]),
            "--metrics-linger-s", "30"], stdout=stdout,
            stderr=open(os.path.join(tmp, "generate.log"), "w"))
        procs.procs.append(("generate", gen))

        def generate_scraped():
            # A generate that failed (its port taken, a bad flag) ends the
            # test at once instead of after the wait's timeout.
            if gen.poll() not in (None, 0):
                raise SystemExit(f"FAIL: generate exited {gen.returncode}: "
                                 + procs.log("generate")[-2000:])
            return scraped({"generate"})
        wait_for("generate's /metrics scraped", generate_scraped, timeout=300)
        wait_for("generate's JSON", lambda: os.path.getsize(out) > 0 and
                 open(out).read().endswith("\n"), timeout=300)
    with open(out) as f:
        stats = json.load(f)["stats"]
    time.sleep(3)  # two scrapes of the final counts

    failures = []
    targets = json.loads(get(f"{prom}/api/v1/targets"))["data"]
    active = targets["activeTargets"]
    down = [f'{t["scrapeUrl"]}: {t["health"]} {t["lastError"]}'
            for t in active if t["health"] != "up"]
    print(f"targets: {len(active)} active, {len(down)} not up")
    if len(active) != 4 or down:
        failures.append(f"targets not all up: {down} of {len(active)}")

    exprs = dashboard_exprs(dashboards)
    if not exprs:
        failures.append(f"no PromQL expressions found in {dashboards}")
    for file, title, expr in exprs:
        result, error = query(prom, expr.replace("$__rate_interval", "1m"))
        if result is None:
            failures.append(f"{file} '{title}': {expr}: error {error}")
        elif not result:
            failures.append(f"{file} '{title}': {expr}: no data")
    print(f"dashboard expressions: {len(exprs)}, "
          f"{len(exprs) - sum(1 for f in failures if 'dashboard' not in f)}"
          " evaluated")

    # Bytes per decoded token as Prometheus reports them for the generate
    # run, against what the same run printed (--stats).
    per_token, error = query(
        prom,
        'sum by (source) (flotilla_coordinator_read_bytes_total{job="generate",'
        'phase="decode"}) / on() group_left() sum(flotilla_coordinator_tokens_'
        'total{job="generate",phase="decode"})')
    got = {r["metric"]["source"]: float(r["value"][1]) for r in per_token or []}
    print("per decoded token, Prometheus:", got)
    print("per decoded token, --stats: experts", stats["expert_bytes_per_token"],
          "trunk", stats["trunk_bytes_per_token"])
    if stats["expert_bytes_per_token"] <= 0 or stats["trunk_bytes_per_token"] <= 0:
        failures.append("the run read no expert or no trunk bytes: nothing "
                        "compared")
    trunk = sum(got.get(s, float("nan"))
                for s in ("trunk", "embedding", "lm_head"))
    if got.get("experts") != stats["expert_bytes_per_token"]:
        failures.append(f"experts bytes/token: Prometheus {got.get('experts')}"
                        f" != --stats {stats['expert_bytes_per_token']}")
    if trunk != stats["trunk_bytes_per_token"]:
        failures.append(f"trunk bytes/token: Prometheus {trunk} != --stats "
                        f"{stats['trunk_bytes_per_token']}")
    if failures:
        for name in ("serve", "worker0", "prometheus"):
            print(f"--- {name} log (tail)\n" + procs.log(name)[-2000:])
        raise SystemExit("FAIL:\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    main()
