// Starts `flotilla-coordinator serve` on a free loopback port for the web
// tests and the serving benches (bench/serve_*.mjs), and stops it again. The server prints
// "flotilla-coordinator: serving NAME (... chat template, ...) on http://HOST:PORT"
// once it accepts requests.
import { spawn } from "node:child_process";

export async function startServer(binary, args, { timeoutMs = 120000 } = {}) {
  const child = spawn(binary, ["serve", "--http-port", "0", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(
        () => reject(new Error("the server did not start:\n" + output)), timeoutMs);
    const onData = (data) => {
      output += data.toString();
      const m = output.match(/serving .* on (http:\/\/[0-9.]+:[0-9]+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (${code}) before serving:\n${output}`));
    });
  });
  return {
    url,
    pid: child.pid,
    exited: () => child.exitCode !== null || child.signalCode !== null,
    output: () => output,
    // SIGTERM: the server drains and exits 0.
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      const exited = new Promise((resolve) => child.on("exit", resolve));
      child.kill("SIGTERM");
      return exited;
    },
  };
}

// A minimal assertion helper that names what failed.
export function check(condition, what) {
  if (!condition) throw new Error("check failed: " + what);
  console.log("ok - " + what);
}

// Runs `body(server)` against a server started with `args`, then stops it
// and exits: 1 when the body threw (with the server's output) or the server
// did not exit 0 on SIGTERM, else 0.
export async function runAgainstServer(binary, args, body) {
  const server = await startServer(binary, args);
  let failed = false;
  try {
    await body(server);
  } catch (e) {
    failed = true;
    console.error("FAILED: " + (e.stack || e));
    console.error("server output:\n" + server.output());
  } finally {
    const code = await server.stop();
    if (code !== 0) {
      failed = true;
      console.error(`the server exited ${code} on SIGTERM`);
    }
  }
  process.exit(failed ? 1 : 0);
}

// What `call()` threw, or null when it did not throw.
export async function thrown(call) {
  try {
    await call();
  } catch (e) {
    return e;
  }
  return null;
}
