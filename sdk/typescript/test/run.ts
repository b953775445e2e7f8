// `npm test`: starts a real Runtime server (see server.ts), points the
// tests at it through WITHRUNTIME_URL and WITHRUNTIME_API_KEY, runs every
// build-test/test/*.test.js with node's test runner, and stops the server
// and its sandboxes at the end, whatever happened.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { startServer } from "./server.js";

const here = dirname(fileURLToPath(import.meta.url));
const only = process.argv.slice(2);
const files = readdirSync(here)
  .filter((f) => f.endsWith(".test.js"))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort()
  .map((f) => join(here, f));

const t0 = Date.now();
const srv = await startServer();
process.stderr.write(`test: Runtime server at ${srv.url} (data ${srv.dataDir}), started in ${Date.now() - t0} ms\n`);

let stopping: Promise<void> | undefined;
const stop = () => (stopping ??= srv.stop());
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => {
    void stop().then(() => process.exit(130));
  });
}

let code = 1;
try {
  const child = spawn(process.execPath, ["--test", ...files], {
    stdio: "inherit",
    env: { ...process.env, WITHRUNTIME_URL: srv.url, WITHRUNTIME_API_KEY: srv.apiKey },
  });
  code = await new Promise<number>((resolve) => child.once("exit", (c, s) => resolve(c ?? (s ? 128 : 1))));
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
