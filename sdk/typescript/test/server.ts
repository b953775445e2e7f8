// Starts a real Runtime server for the tests: `withruntime serve` (the
// binary from PATH, or WITHRUNTIME_BIN) on a free port with a temporary data
// directory and the installed templates, and stops it with everything it
// started.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface TestServer {
  url: string;
  apiKey: string;
  dataDir: string;
  logFile: string;
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address();
      s.close(() => (typeof addr === "object" && addr ? resolve(addr.port) : reject(new Error("no port"))));
    });
  });
}

function exited(p: ChildProcess, ms: number): Promise<boolean> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    p.once("exit", () => {
      clearTimeout(t);
      resolve(true);
    });
  });
}

/** Pids of processes whose command line mentions dir (the server's sandboxes: runsc and its gofer). */
function processesUnder(dir: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, "utf8");
      if (cmdline.includes(dir)) out.push(Number(name));
    } catch {
      // gone
    }
  }
  return out.filter((pid) => pid !== process.pid);
}

/** Mount points under dir, deepest first (runsc leaves a namespace mounted in its root). */
function mountsUnder(dir: string): string[] {
  const mounts = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[4] ?? "")
    .filter((m) => m === dir || m.startsWith(dir + "/"));
  return mounts.sort((a, b) => b.length - a.length);
}

export async function startServer(): Promise<TestServer> {
  const bin = process.env["WITHRUNTIME_BIN"] || "withruntime";
  const templates = process.env["WITHRUNTIME_TEST_TEMPLATES"] || "/var/lib/withruntime/templates";
  const dataDir = mkdtempSync(join(tmpdir(), "withruntime-ts-"));
  const logFile = join(dataDir, "server.log");
  // A templates directory of the server's own, linking the installed
  // templates (never written): the template tests make and delete theirs here.
  const ownTemplates = join(dataDir, "templates");
  mkdirSync(ownTemplates);
  for (const name of readdirSync(templates).sort()) {
    if (!name.startsWith(".") && statSync(join(templates, name)).isDirectory()) symlinkSync(join(templates, name), join(ownTemplates, name));
  }
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const log = openSync(logFile, "a");
  const proc = spawn(
    bin,
    // --meter-interval 1s (default 5 s): a running sandbox's cost shows soon.
    ["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", dataDir, "--templates-dir", ownTemplates, "--no-build", "--meter-interval", "1s"],
    { stdio: ["ignore", log, log] },
  );
  let spawnError: Error | undefined;
  proc.once("error", (err) => (spawnError = err));

  const fail = async (why: string): Promise<never> => {
    proc.kill("SIGKILL");
    await exited(proc, 5000);
    let tail = "";
    try {
      tail = readFileSync(logFile, "utf8").split("\n").slice(-30).join("\n");
    } catch {
      // no log
    }
    cleanup(dataDir);
    throw new Error(`${why}\n--- server log (${logFile}) ---\n${tail}`);
  };

  const deadline = Date.now() + 30_000;
  for (;;) {
    if (spawnError) return fail(`cannot start ${bin}: ${spawnError.message} (is withruntime on PATH? set WITHRUNTIME_BIN)`);
    if (proc.exitCode !== null) return fail(`${bin} serve exited with code ${proc.exitCode}`);
    try {
      const r = await fetch(`${url}/v1/health`);
      if (r.ok) break;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) return fail(`${bin} serve did not answer GET /v1/health within 30 s`);
    await sleep(100);
  }
  const apiKey = readFileSync(join(dataDir, "local.key"), "utf8").trim();

  const stop = async () => {
    // Sandboxes outlive a server (the next one adopts them): destroy them first.
    try {
      const auth = { Authorization: `Bearer ${apiKey}` };
      const r = await fetch(`${url}/v1/sandboxes?state=running`, { headers: auth });
      const { sandboxes } = (await r.json()) as { sandboxes: { id: string }[] };
      await Promise.all(sandboxes.map((s) => fetch(`${url}/v1/sandboxes/${s.id}`, { method: "DELETE", headers: auth })));
      // Volumes too: each holds a loop device and a mount on the host.
      const v = await fetch(`${url}/v1/volumes`, { headers: auth });
      const { volumes } = (await v.json()) as { volumes: { name: string }[] };
      await Promise.all(volumes.map((x) => fetch(`${url}/v1/volumes/${encodeURIComponent(x.name)}`, { method: "DELETE", headers: auth })));
    } catch {
      // the server is gone already; below
    }
    proc.kill("SIGTERM");
    if (!(await exited(proc, 10_000))) {
      proc.kill("SIGKILL");
      await exited(proc, 5000);
    }
    cleanup(dataDir);
  };
  return { url, apiKey, dataDir, logFile, stop };
}

function cleanup(dataDir: string): void {
  for (const pid of processesUnder(dataDir)) {
    // Only processes of this test server's sandboxes: their command line names its data directory.
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
  for (const m of mountsUnder(dataDir)) spawnSync("umount", ["-l", m]);
  if (process.env["WITHRUNTIME_TEST_KEEP"]) return;
  try {
    rmSync(dataDir, { recursive: true, force: true });
  } catch (err) {
    process.stderr.write(`test: could not remove ${dataDir}: ${(err as Error).message}\n`);
  }
}
