// `npm test`: builds the SDK (sdk/typescript) and every adapter with its
// tests, starts one real Runtime server with the SDK's test harness
// (sdk/typescript/test/server.ts: `withruntime serve` from PATH or
// WITHRUNTIME_BIN, a temporary data directory, the templates in
// /var/lib/withruntime/templates; it needs root), runs every adapter's
// build-test/test/*.test.js with node's test runner against it, and stops
// the server and its sandboxes at the end, whatever happened.
//
//   node test/run.mjs            all adapters
//   node test/run.mjs mastra     only the test files whose path contains "mastra"
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { delimiter, dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const sdk = join(root, "..", "..", "sdk", "typescript");
const only = process.argv.slice(2);

function run(cmd, args, cwd) {
  process.stderr.write(`test: (cd ${relative(root, cwd) || "."} && ${cmd} ${args.join(" ")})\n`);
  const r = spawnSync(cmd, args, { cwd, stdio: "inherit" });
  if (r.status !== 0) {
    process.stderr.write(`test: ${cmd} ${args.join(" ")} failed in ${cwd}\n`);
    process.exit(r.status ?? 1);
  }
}

// The SDK: its dist (what the adapters import) and its test harness.
if (!existsSync(join(sdk, "node_modules", "typescript"))) run("npm", ["ci", "--no-audit", "--no-fund"], sdk);
run("npm", ["run", "build"], sdk);
run("npm", ["run", "build:test"], sdk);

// Every adapter and its tests (tsc --strict), whichever tests run, into
// fresh build-test directories (no test of a removed file lingers).
const workspaces = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).workspaces;
for (const ws of workspaces) rmSync(join(root, ws, "build-test"), { recursive: true, force: true });
run("npm", ["run", "build:test", "--workspaces"], root);

const files = workspaces
  .flatMap((ws) => {
    const dir = join(root, ws, "build-test", "test");
    return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith(".test.js")).map((f) => join(dir, f)) : [];
  })
  .filter((f) => only.length === 0 || only.some((o) => relative(root, f).includes(o)))
  .sort();
if (files.length === 0) {
  process.stderr.write(`test: no test files match ${only.join(" ")}\n`);
  process.exit(1);
}

// `npm test` puts node_modules/.bin first on PATH, and there `withruntime` is
// the SDK package's own small CLI: the server is the Go binary further on.
if (!process.env.WITHRUNTIME_BIN) {
  const dir = (process.env.PATH ?? "")
    .split(delimiter)
    .filter((d) => d && !d.split(sep).includes("node_modules"))
    .find((d) => existsSync(join(d, "withruntime")));
  if (dir) process.env.WITHRUNTIME_BIN = join(dir, "withruntime");
}

const { startServer } = await import(join(sdk, "build-test", "test", "server.js"));
const t0 = Date.now();
const srv = await startServer();
process.stderr.write(`test: Runtime server at ${srv.url} (data ${srv.dataDir}), started in ${Date.now() - t0} ms\n`);

let stopping;
const stop = () => (stopping ??= srv.stop());
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.once(sig, () => {
    void stop().then(() => process.exit(130));
  });
}

let code = 1;
try {
  const child = spawn(process.execPath, ["--test", ...files], {
    stdio: "inherit",
    cwd: root,
    env: { ...process.env, WITHRUNTIME_URL: srv.url, WITHRUNTIME_API_KEY: srv.apiKey },
  });
  code = await new Promise((resolve) => child.once("exit", (c, s) => resolve(c ?? (s ? 128 : 1))));
  if (code !== 0) {
    let tail = "";
    try {
      tail = readFileSync(srv.logFile, "utf8").split("\n").slice(-40).join("\n");
    } catch {
      // no log
    }
    process.stderr.write(`--- last lines of the server log ---\n${tail}\n`);
  }
} finally {
  await stop();
}
process.exitCode = code;
