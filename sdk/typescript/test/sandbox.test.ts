// The SDK against a real Runtime server and real gVisor sandboxes (npm test
// starts the server and sets WITHRUNTIME_URL and WITHRUNTIME_API_KEY).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { describe, test } from "node:test";
import { promisify } from "node:util";

import {
  BadRequestError,
  ConflictError,
  LeaseEndedError,
  NotFoundError,
  RangeNotSatisfiableError,
  Sandbox,
  SandboxPausedError,
  SandboxStoppedError,
  eventData,
  stdoutData,
  type ExecEvent,
} from "withruntime";
import { errorResultFor, sandboxTools, type ExecOutput, type ListOutput, type ReadOutput } from "withruntime/tools";

const run = promisify(execFile);
const opts = { timeoutSeconds: 300 };

describe("a real sandbox", { concurrency: 4 }, () => {
  test("the README snippet: await using, write a file, exec it", async () => {
    let id = "";
    {
      await using sbx = await Sandbox.create({ network: { internet: false }, timeoutSeconds: 1800 });
      id = sbx.id;
      assert.match(sbx.id, /^sbx_/);
      assert.equal(sbx.info.state, "running");
      const fi = await sbx.files.write("hello.py", "print(6 * 7)\n");
      assert.equal(fi.path, "/workspace/hello.py");
      assert.equal(fi.size, 13);
      const res = await sbx.exec("python3 hello.py");
      assert.equal(res.exitCode, 0);
      assert.equal(res.stdout, "42\n");
    }
    // Leaving the block destroyed it.
    const [info] = (await Sandbox.list()).filter((s) => s.id === id);
    assert.equal(info?.state, "stopped");
    assert.equal(info?.endReason, "deleted");
  });

  test("the dispatch snippet (examples/dispatch.ts) prints a result with exit code 0 and 42", async () => {
    const { stdout } = await run(process.execPath, [new URL("../examples/dispatch.js", import.meta.url).pathname]);
    assert.match(stdout, /text: 'exit_code: 0\\nstdout:\\n42\\nstderr: \(empty\)'/);
    assert.match(stdout, /isError: false/);
    assert.match(stdout, /exitCode: 0/);
    assert.match(stdout, /stdout: '42\\n'/);
  });

  test("tools: write, exec, read, list as a model calls them", async () => {
    await using sbx = await Sandbox.create(opts);
    const tools = sandboxTools(sbx);
    const exec = tools.find((t) => t.name === "runtime_exec")!;
    const [, read, write, list] = tools;

    const w = await write!.execute(JSON.parse('{"path": "hello.py", "content": "print(6 * 7)\\n"}'));
    assert.deepEqual(w, { text: "wrote 13 bytes to /workspace/hello.py", isError: false, data: { path: "/workspace/hello.py", bytes: 13 } });

    const e = await exec.execute({ command: "python3 hello.py", cwd: "", timeoutSeconds: 0 });
    assert.equal(e.isError, false);
    assert.equal(e.text, "exit_code: 0\nstdout:\n42\nstderr: (empty)");
    const out = e.data as ExecOutput;
    assert.deepEqual(Object.keys(out), ["exitCode", "stdout", "stderr", "stdoutCutBytes", "stderrCutBytes", "timedOut", "oomKilled", "cwd", "durationMs"]);
    assert.equal(out.exitCode, 0);
    assert.equal(out.stdout, "42\n");
    assert.equal(out.cwd, "/workspace");

    const r = await read!.execute({ path: "/workspace/hello.py" });
    assert.equal(r.text, "/workspace/hello.py (13 bytes, encoding: utf-8)\nprint(6 * 7)\n");
    assert.deepEqual(r.data, { path: "/workspace/hello.py", size: 13, encoding: "utf-8", content: "print(6 * 7)\n", cutBytes: 0 });

    await sbx.files.mkdirAll("src/pkg");
    const l = await list!.execute({ path: "" });
    assert.equal(l.isError, false);
    assert.match(l.text, /^\/workspace: 2 entries\nfile +13  hello\.py\ndir +-  src\/$/);
    assert.equal((l.data as ListOutput).entries.length, 2);

    // Errors the model can fix are results, with what to do.
    const missing = await read!.execute({ path: "nope.txt" });
    assert.equal(missing.isError, true);
    assert.match(missing.text, /^error: .*runtime_list_files shows a directory's contents/);
    const dir = await read!.execute({ path: "src" });
    assert.equal(dir.text, "error: /workspace/src is a directory; list it with runtime_list_files");
    const badCwd = await exec.execute({ command: "ls", cwd: "no/such/dir", timeoutSeconds: 0 });
    assert.equal(badCwd.isError, true);
    assert.match(badCwd.text, /^error: /);
    const notDir = await list!.execute({ path: "hello.py" });
    assert.equal(notDir.isError, true);
  });

  test("tools: a failed command is a result; output is capped with a marker; a timeout says so", async () => {
    await using sbx = await Sandbox.create(opts);
    const [exec, read] = sandboxTools(sbx);
    const fail = await exec!.execute({ command: "echo out; echo err >&2; exit 3" });
    assert.equal(fail.isError, false);
    assert.equal(fail.text, "exit_code: 3\nstdout:\nout\nstderr:\nerr");
    const notFound = await exec!.execute({ command: "no-such-program" });
    assert.equal((notFound.data as ExecOutput).exitCode, 127);

    const big = await exec!.execute({ command: "seq 1 100000" });
    const data = big.data as ExecOutput;
    assert.ok(data.stdoutCutBytes > 0);
    assert.ok(Buffer.byteLength(data.stdout) < 17_000);
    assert.ok(data.stdout.startsWith("1\n2\n3\n"));
    assert.ok(data.stdout.endsWith("99999\n100000\n"));
    assert.match(data.stdout, /\[\.\.\. \d+ bytes cut from the middle of stdout \(588895 bytes in all\); the first and last parts are shown \.\.\.\]/);

    const slow = await exec!.execute({ command: "sleep 10", timeoutSeconds: 1 });
    assert.equal((slow.data as ExecOutput).exitCode, 124);
    assert.equal((slow.data as ExecOutput).timedOut, true);
    assert.match(slow.text, /^exit_code: 124\nnote: the command was killed by its timeout after 1 seconds/);

    await sbx.files.write("bin.dat", new Uint8Array([0, 1, 2, 255, 254]));
    const bin = await read!.execute({ path: "bin.dat" });
    assert.equal((bin.data as ReadOutput).encoding, "base64");
    assert.equal((bin.data as ReadOutput).content, "AAEC//4=");
  });

  test("exec: a non-zero exit is a result, not an exception", async () => {
    await using sbx = await Sandbox.create(opts);
    const res = await sbx.exec("echo out; echo err >&2; exit 3");
    assert.equal(res.exitCode, 3);
    assert.equal(res.stdout, "out\n");
    assert.equal(res.stderr, "err\n");
    assert.equal(res.timedOut, false);
    assert.equal((await sbx.exec("no-such-program")).exitCode, 127);
    assert.equal((await sbx.exec(["python3", "-c", "import sys; sys.exit(5)"])).exitCode, 5);
    const t = await sbx.exec({ command: "sleep 10", timeoutSeconds: 0.5 });
    assert.equal(t.exitCode, 124);
    assert.equal(t.timedOut, true);
    // A request that cannot run at all is an exception.
    await assert.rejects(sbx.exec({ command: "ls", cwd: "/no/such/dir" }), BadRequestError);
    // Not UTF-8: the exact bytes are kept.
    const raw = await sbx.exec("printf 'a\\xffb'");
    assert.equal(raw.stdoutLossy, true);
    assert.deepEqual([...stdoutData(raw)], [0x61, 0xff, 0x62]);
  });

  test("execStream yields events as they happen; execTo copies them", async () => {
    await using sbx = await Sandbox.create(opts);
    const t0 = Date.now();
    const seen: { ev: ExecEvent; at: number }[] = [];
    for await (const ev of sbx.execStream("for i in 1 2 3; do echo line$i; sleep 0.4; done; echo done >&2; exit 4")) {
      seen.push({ ev, at: Date.now() - t0 });
    }
    const types = seen.map((s) => s.ev.type);
    assert.equal(types[0], "start");
    assert.equal(types.at(-1), "exit");
    const stdout = seen.filter((s) => s.ev.type === "stdout");
    assert.equal(stdout.map((s) => s.ev.data).join(""), "line1\nline2\nline3\n");
    assert.equal(seen.filter((s) => s.ev.type === "stderr").map((s) => s.ev.data).join(""), "done\n");
    const exit = seen.at(-1)!.ev;
    assert.equal(exit.result?.exitCode, 4);
    assert.equal(exit.result?.stdoutBytes, 18);
    // The first line arrived long before the command ended.
    assert.ok(seen.at(-1)!.at - stdout[0]!.at >= 800, `first stdout at ${stdout[0]!.at} ms, exit at ${seen.at(-1)!.at} ms`);

    const chunks: Uint8Array[] = [];
    const res = await sbx.execTo("printf 'x\\xfey'; echo e >&2", { stdout: (b) => chunks.push(b), stderr: { write: () => true } });
    assert.equal(res.exitCode, 0);
    assert.deepEqual([...Buffer.concat(chunks)], [0x78, 0xfe, 0x79]);

    // Leaving the loop early closes the stream.
    for await (const ev of sbx.execStream("yes")) {
      if (ev.type === "stdout") break;
    }
    assert.equal((await sbx.exec("echo still")).stdout, "still\n");
    assert.deepEqual([...eventData({ type: "stdout", data: "é" })], [0xc3, 0xa9]);
  });

  test("files: a binary round trip, text, listing, stat, mkdir, rename, remove", async () => {
    await using sbx = await Sandbox.create(opts);
    const every = new Uint8Array(256 * 16).map((_, i) => i % 256);
    const rand = new Uint8Array(randomBytes(1 << 20));
    for (const [name, data] of [["every.bin", every], ["dir/rand.bin", rand]] as const) {
      const fi = await sbx.files.write(name, data);
      assert.equal(fi.size, data.length);
      assert.equal(fi.type, "file");
      const back = await sbx.files.readFile(name);
      assert.ok(Buffer.from(back).equals(Buffer.from(data)), `${name} came back different`);
      const sum = await sbx.exec(`sha256sum ${name}`);
      assert.equal(sum.stdout.split(" ")[0], createHash("sha256").update(data).digest("hex"));
    }
    await sbx.files.write("text.txt", "héllo wörld ✓\n");
    assert.equal(await sbx.files.readText("text.txt"), "héllo wörld ✓\n");
    await sbx.files.write("blob.txt", new Blob(["from a blob"]));
    assert.equal(await sbx.files.readText("blob.txt"), "from a blob");
    async function* gen() {
      yield "part one, ";
      yield new TextEncoder().encode("part two");
    }
    await sbx.files.write("gen.txt", gen());
    assert.equal(await sbx.files.readText("gen.txt"), "part one, part two");

    const names = (await sbx.files.list()).map((e) => e.name);
    assert.deepEqual(names, ["blob.txt", "dir", "every.bin", "gen.txt", "text.txt"]);
    assert.deepEqual((await sbx.files.list("", { depth: 2 })).map((e) => e.path), [
      "/workspace/blob.txt",
      "/workspace/dir",
      "/workspace/dir/rand.bin",
      "/workspace/every.bin",
      "/workspace/gen.txt",
      "/workspace/text.txt",
    ]);
    assert.equal((await sbx.files.stat("dir")).type, "dir");
    await sbx.files.mkdir("newdir");
    await sbx.files.mkdirAll("a/b/c");
    assert.equal((await sbx.files.rename("text.txt", "a/b/moved.txt")).path, "/workspace/a/b/moved.txt");
    await sbx.files.remove("blob.txt");
    await assert.rejects(sbx.files.stat("blob.txt"), NotFoundError);
    await assert.rejects(sbx.files.readFile("nope"), NotFoundError);
    await sbx.files.removeAll("a");
    await assert.rejects(sbx.files.stat("a"), NotFoundError);
    let n = 0;
    const sink = new WritableStream<Uint8Array>({ write: (c) => void (n += c.length) });
    assert.equal(await sbx.files.read("dir/rand.bin", sink), 1 << 20);
    assert.equal(n, 1 << 20);
  });

  test("files: a ranged download resumes one cut short; a listing comes in pages", async () => {
    await using sbx = await Sandbox.create(opts);
    const data = new Uint8Array(16384).map((_, i) => i % 251);
    await sbx.files.write("r/data.bin", data);
    const part = await sbx.files.readFile("r/data.bin", { offset: 100, length: 50 });
    assert.ok(Buffer.from(part).equals(Buffer.from(data.subarray(100, 150))));
    const rest = await sbx.files.readFile("r/data.bin", { offset: 7000 });
    assert.ok(Buffer.concat([data.subarray(0, 7000), rest]).equals(Buffer.from(data)));
    assert.equal((await sbx.files.readFile("r/data.bin", { offset: data.length })).length, 0);
    await assert.rejects(sbx.files.readFile("r/data.bin", { offset: data.length + 1 }), RangeNotSatisfiableError);

    await sbx.exec("mkdir -p r/many && cd r/many && for i in $(seq -w 1 25); do : > f$i; done");
    let page = await sbx.files.listPage("r/many", { limit: 10 });
    assert.equal(page.entries.length, 10);
    assert.ok(page.truncated && page.next);
    assert.equal(page.total, 25);
    const names = page.entries.map((e) => e.name);
    while (page.truncated) {
      page = await sbx.files.listPage("r/many", { limit: 10, cursor: page.next });
      names.push(...page.entries.map((e) => e.name));
    }
    const want = Array.from({ length: 25 }, (_, i) => `f${String(i + 1).padStart(2, "0")}`);
    assert.deepEqual(names, want);
    assert.deepEqual((await sbx.files.list("r/many")).map((e) => e.name), want);
  });

  test("connect to an existing sandbox; list; setTimeout; kill", async () => {
    const tag = randomBytes(6).toString("hex");
    const sbx = await Sandbox.create({ ...opts, metadata: { test: tag } });
    try {
      await sbx.files.write("note.txt", "left by the first handle");
      const again = await Sandbox.connect(sbx.id);
      assert.equal(again.id, sbx.id);
      assert.equal(again.info.metadata["test"], tag);
      assert.equal((await again.exec("cat note.txt")).stdout, "left by the first handle");

      const listed = await Sandbox.list({ metadata: { test: tag } });
      assert.deepEqual(listed.map((s) => s.id), [sbx.id]);
      assert.equal((await Sandbox.list({ state: "stopped", metadata: { test: tag } })).length, 0);

      const before = Date.parse(sbx.info.leaseEndsAt);
      const info = await sbx.setTimeout(3600);
      assert.ok(Date.parse(info.leaseEndsAt) > before + 3000 * 1000);
      assert.equal(sbx.info.leaseEndsAt, info.leaseEndsAt);
      await assert.rejects(sbx.setTimeout(0), BadRequestError);

      await again.kill();
      await again.kill(); // idempotent
      await sbx.kill(); // already gone counts as killed
      await assert.rejects(sbx.exec("true"), SandboxStoppedError);
      await assert.rejects(Sandbox.connect(sbx.id), SandboxStoppedError);
      await assert.rejects(Sandbox.connect("sbx_doesnotexist0000"), NotFoundError);
    } finally {
      await sbx.kill();
    }
  });

  test("pause and resume: memory and files kept; a paused sandbox refuses execs; connect resumes", async () => {
    await using sbx = await Sandbox.create(opts);
    await sbx.files.write("kept.txt", "kept");
    await sbx.exec({ command: "python3 -c 'import time; open(\"/tmp/pid\", \"w\").write(\"x\"); time.sleep(3600)' &" });
    const paused = await sbx.pause();
    assert.equal(paused.state, "paused");
    assert.ok((paused.imageBytes ?? 0) > 0 && paused.pausedAt !== undefined);
    await assert.rejects(sbx.exec("true"), (e: unknown) => e instanceof SandboxPausedError && e.status === 409 && e.code === "sandbox_paused");
    await assert.rejects(sbx.pause(), ConflictError);
    assert.deepEqual((await Sandbox.list({ state: "paused" })).map((s) => s.id).filter((id) => id === sbx.id), [sbx.id]);
    const again = await Sandbox.connect(sbx.id); // resumes it
    assert.equal(again.info.state, "running");
    assert.equal((await again.exec("cat kept.txt; cat /tmp/pid")).stdout, "keptx");
    await assert.rejects(again.resume(), ConflictError);
    await sbx.pause();
    const resumed = await sbx.resume(600);
    assert.equal(resumed.state, "running");
    assert.ok(Date.parse(resumed.leaseEndsAt) > Date.now() + 500 * 1000);
  });

  test("pause mode filesystem: files kept, processes gone; pauseMode at the lease end", async () => {
    await using sbx = await Sandbox.create(opts);
    await sbx.files.write("kept.txt", "kept");
    await sbx.exec("(setsid sleep 3600 >/dev/null 2>&1 &)");
    const paused = await sbx.pause({ mode: "filesystem" });
    assert.equal(paused.state, "paused");
    assert.equal(paused.imageMode, "filesystem");
    const resumed = await sbx.resume();
    assert.equal(resumed.state, "running");
    assert.equal(resumed.imageMode, undefined);
    assert.equal((await sbx.exec("cat kept.txt; pgrep -x sleep || echo none")).stdout, "keptnone\n");
    await assert.rejects(sbx.pause({ mode: "memory" as "full" }), BadRequestError);
    await using lease = await Sandbox.create({ timeoutSeconds: 3, onLeaseEnd: "pause", pauseMode: "filesystem" });
    assert.equal(lease.info.pauseMode, "filesystem");
    await lease.files.write("f", "files only");
    const deadline = Date.now() + 30_000;
    while ((await lease.refresh()).state !== "paused" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    assert.equal(lease.info.imageMode, "filesystem");
    assert.equal((await lease.exec("cat f")).stdout, "files only");
  });

  test("onLeaseEnd pause: the lease end pauses, the next exec resumes", async () => {
    await using sbx = await Sandbox.create({ timeoutSeconds: 3, onLeaseEnd: "pause" });
    assert.equal(sbx.info.onLeaseEnd, "pause");
    assert.equal(sbx.info.autoResume, true);
    await sbx.files.write("f", "still here");
    const deadline = Date.now() + 30_000;
    while ((await sbx.refresh()).state !== "paused" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    assert.equal(sbx.info.state, "paused");
    assert.equal((await sbx.exec("cat f")).stdout, "still here");
    assert.equal((await sbx.refresh()).state, "running");
  });

  test("lease end: a clear LeaseEndedError, for the running command and after", async () => {
    const sbx = await Sandbox.create({ timeoutSeconds: 2 });
    const tools = sandboxTools(sbx);
    // A command running when the lease ends.
    const t0 = Date.now();
    await assert.rejects(
      (async () => {
        for await (const _ of sbx.execStream("sleep 60")) {
          // wait
        }
      })(),
      (err: unknown) => err instanceof LeaseEndedError && err.status === 410 && err.code === "lease_ended" && /lease ended/.test(err.message),
    );
    assert.ok(Date.now() - t0 < 30_000);
    await assert.rejects(sbx.exec("true"), LeaseEndedError);
    await assert.rejects(sbx.files.readFile("x"), LeaseEndedError);
    await assert.rejects(Sandbox.connect(sbx.id), LeaseEndedError);
    // The tools throw (Runtime itself failed), and errorResultFor says what to tell the model.
    const err = await tools[0]!.execute({ command: "true" }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof LeaseEndedError);
    assert.match(errorResultFor(err).text, /^error: the sandbox is no longer running \(withruntime: lease_ended \(410\): .*\); its files are gone$/);
    // Invalid arguments still come back as results.
    assert.equal((await tools[0]!.execute({})).isError, true);
    await sbx.kill(); // a sandbox whose lease ended counts as killed
  });
});
