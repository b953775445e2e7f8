// runCode and code contexts against real kernels in a code-interpreter
// sandbox (the template is built in the test server's templates directory
// if missing: a few minutes once, then cached).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { before, describe, test } from "node:test";
import { promisify } from "node:util";

import {
  CODE_INTERPRETER_TEMPLATE,
  NotFoundError,
  Sandbox,
  UnsupportedError,
  type OutputMessage,
  type Result,
} from "withruntime";

const run = promisify(execFile);

before(async () => {
  const env = { ...process.env };
  delete env["WITHRUNTIME_URL"];
  delete env["WITHRUNTIME_API_KEY"];
  const templates = process.env["WITHRUNTIME_TEST_TEMPLATES"] || "/var/lib/withruntime/templates";
  await run(process.env["WITHRUNTIME_BIN"] || "withruntime", ["template", "build", "--missing", "--templates-dir", templates, CODE_INTERPRETER_TEMPLATE], {
    env,
    maxBuffer: 64 << 20,
  });
});

function pngSize(b: Uint8Array): [number, number] {
  assert.deepEqual([...b.slice(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const v = new DataView(b.buffer, b.byteOffset);
  return [v.getUint32(16), v.getUint32(20)];
}

describe("the code interpreter", { concurrency: 2 }, () => {
  test("runCode: values, charts, errors, timeouts, env", async () => {
    await using sbx = await Sandbox.create({ template: CODE_INTERPRETER_TEMPLATE, timeoutSeconds: 300 });
    let ex = await sbx.runCode("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\ndf");
    assert.equal(ex.error, undefined);
    const main = ex.results.filter((r) => r.isMainResult);
    assert.equal(main.length, 1);
    assert.match(main[0]!.html ?? "", /<table/);
    assert.equal(ex.text, main[0]!.text);
    assert.equal(ex.contextId, "default");
    assert.equal((await sbx.runCode("int(df.a.sum())")).text, "3");

    const out: OutputMessage[] = [];
    const results: Result[] = [];
    ex = await sbx.runCode("import matplotlib.pyplot as plt\nprint('plotting')\nplt.plot([1, 2, 3]);", {
      onStdout: (m) => void out.push(m),
      onResult: (r) => void results.push(r),
    });
    assert.deepEqual(out, [{ line: "plotting\n", error: false }]);
    assert.deepEqual(ex.logs.stdout, ["plotting\n"]);
    assert.equal(results.length, 1);
    assert.equal(ex.results.length, 1);
    const [w, h] = pngSize(results[0]!.pngBytes()!);
    assert.ok(w >= 100 && h >= 100 && w <= 5000 && h <= 5000, `${w}x${h}`);
    assert.ok(results[0]!.formats().includes("image/png"));

    const errors: string[] = [];
    ex = await sbx.runCode("1/0", { onError: (e) => void errors.push(e.name) });
    assert.equal(ex.error?.name, "ZeroDivisionError");
    assert.match(ex.error?.traceback ?? "", /ZeroDivisionError/);
    assert.deepEqual(errors, ["ZeroDivisionError"]);

    ex = await sbx.runCode("import time; time.sleep(30)", { timeoutSeconds: 1 });
    assert.equal(ex.timedOut, true);
    assert.equal(ex.error?.name, "TimeoutError");
    assert.equal(ex.stateLost, false);
    assert.equal((await sbx.runCode("len(df)")).text, "2");
    assert.equal((await sbx.runCode("import os; os.environ.get('WHO')", { env: { WHO: "me" } })).text, "'me'");
  });

  test("contexts are isolated; restart and remove", async () => {
    await using sbx = await Sandbox.create({ template: CODE_INTERPRETER_TEMPLATE, timeoutSeconds: 300 });
    const ctx = await sbx.createCodeContext({ cwd: "/tmp" });
    assert.match(ctx.id, /^ctx_/);
    assert.equal(ctx.cwd, "/tmp");
    await sbx.runCode("v = 1", { context: ctx });
    assert.equal((await sbx.runCode("'v' in globals()")).text, "False");
    assert.equal((await sbx.runCode("v", { context: ctx.id })).text, "1");
    assert.deepEqual((await sbx.listCodeContexts()).map((c) => c.id).sort(), ["default", ctx.id].sort());
    assert.equal((await sbx.restartCodeContext(ctx)).restarts, 1);
    assert.equal((await sbx.runCode("'v' in globals()", { context: ctx })).text, "False");
    await sbx.removeCodeContext(ctx);
    await assert.rejects(sbx.runCode("1", { context: ctx }), NotFoundError);
  });

  test("a sandbox without kernels says so", async () => {
    await using sbx = await Sandbox.create({ timeoutSeconds: 120 });
    await assert.rejects(sbx.runCode("1"), (err: unknown) => err instanceof UnsupportedError && /code-interpreter/.test(err.message));
  });
});
