// The package as a user gets it: packed with npm pack, installed into a
// fresh project, and run with npx against the configured server.
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const pkgDir = fileURLToPath(new URL("../../", import.meta.url));
const npm = process.platform === "win32" ? "npm.cmd" : "npm";
const npx = process.platform === "win32" ? "npx.cmd" : "npx";

/** Runs a command; resolves with its exit code and output, whatever the code. */
function sh(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(cmd, args, { cwd, env, timeout: 120_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

describe("the installed package", () => {
  let project = "";
  // Never reach a registry: everything needed is the packed tarball.
  const env = { ...process.env, npm_config_offline: "true", npm_config_audit: "false", npm_config_fund: "false", npm_config_update_notifier: "false" };

  before(async () => {
    project = mkdtempSync(join(tmpdir(), "withruntime-npx-"));
    const pack = spawnSync(npm, ["pack", "--ignore-scripts", "--json", "--pack-destination", project], { cwd: pkgDir, env, encoding: "utf8" });
    assert.equal(pack.status, 0, pack.stderr);
    const [{ filename, files }] = JSON.parse(pack.stdout) as [{ filename: string; files: { path: string }[] }];
    const paths = files.map((f) => f.path);
    for (const want of ["dist/index.js", "dist/index.d.ts", "dist/tools/index.js", "dist/tools/index.d.ts", "dist/cli.js", "definitions/runtime_exec.json", "README.md"]) {
      assert.ok(paths.includes(want), `the package lacks ${want}: ${paths.join(", ")}`);
    }
    assert.ok(!paths.some((p) => p.startsWith("src/") || p.startsWith("test/") || p.startsWith("build-test/")), paths.join(", "));
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    const inst = await sh(npm, ["install", "--no-save", join(project, filename)], project, env);
    assert.equal(inst.code, 0, inst.stderr);
  });

  after(() => {
    if (project) rmSync(project, { recursive: true, force: true });
  });

  test("npx withruntime sandbox run -- python3 -c 'print(6*7)' prints 42", async () => {
    const r = await sh(npx, ["withruntime", "sandbox", "run", "--", "python3", "-c", "print(6*7)"], project, env);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, "42\n");
  });

  test("sandbox run passes the command's exit code and stderr on; one word runs in bash", async () => {
    const args = ["sandbox", "run", "--timeout", "2m", "-e", "GREETING=hi", "--", "echo $GREETING; echo err >&2; exit 7"];
    const r = await sh(npx, ["withruntime", ...args], project, env);
    assert.equal(r.code, 7, r.stderr);
    assert.equal(r.stdout, "hi\n");
    assert.equal(r.stderr, "err\n");
  });

  test("sandbox run: a Runtime failure exits 125 with the reason; a usage error exits 2", async () => {
    const r = await sh(npx, ["withruntime", "sandbox", "run", "--template", "no-such-template", "--", "true"], project, env);
    assert.equal(r.code, 125, r.stderr);
    assert.match(r.stderr, /^withruntime: bad_request \(400\): /);
    const down = await sh(npx, ["withruntime", "sandbox", "run", "--", "true"], project, { ...env, WITHRUNTIME_URL: "http://127.0.0.1:1" });
    assert.equal(down.code, 125);
    assert.match(down.stderr, /cannot reach the Runtime server at http:\/\/127\.0\.0\.1:1/);
    const usage = await sh(npx, ["withruntime", "sandbox", "run"], project, env);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /give the command to run after --/);
  });

  test("the dispatch snippet runs against the installed package", async () => {
    copyFileSync(fileURLToPath(new URL("../examples/dispatch.js", import.meta.url)), join(project, "dispatch.js"));
    const r = await sh(process.execPath, ["dispatch.js"], project, env);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /exit_code: 0\\nstdout:\\n42\\n/);
  });
});
