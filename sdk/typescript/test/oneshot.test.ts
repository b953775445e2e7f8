// The one-shot against a real Runtime server and real gVisor sandboxes: a
// create with its first command (Sandbox.createAndExec, Sandbox.runOnce).
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { BadRequestError, Sandbox } from "withruntime";

const opts = { timeoutSeconds: 300 };

describe("the one-shot: a create with its first command", () => {
  test("runOnce runs the command in a new sandbox and destroys it", async () => {
    const res = await Sandbox.runOnce("echo $A $B; exit 3", {
      env: { A: "create" },
      metadata: { t: "ts-once" },
    });
    assert.equal(res.exitCode, 3);
    assert.equal(res.stdout, "create\n");
    const [info] = await Sandbox.list({ metadata: { t: "ts-once" } });
    assert.equal(info?.state, "stopped");
    assert.equal(info?.endReason, "deleted");
  });

  test("createAndExec returns the sandbox and the result; the sandbox runs on", async () => {
    const { sandbox, result } = await Sandbox.createAndExec({ argv: ["python3", "-c", "print(6*7)"], env: { X: "1" } }, opts);
    try {
      assert.equal(result.exitCode, 0);
      assert.equal(result.stdout, "42\n");
      assert.equal(sandbox.info.state, "running");
      assert.equal((await sandbox.exec("echo again")).stdout, "again\n");
    } finally {
      await sandbox.kill();
    }
  });

  test("a command that cannot run: the error carries the sandbox; bad input boots nothing", async () => {
    const err = await Sandbox.createAndExec({ command: "true", cwd: "/nowhere" }, opts).then(
      () => assert.fail("no error"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof BadRequestError);
    const made = (err as BadRequestError & { sandbox?: Sandbox }).sandbox;
    assert.ok(made);
    assert.equal((await made.refresh()).state, "running");
    await made.kill();
    await assert.rejects(Sandbox.runOnce({ command: "true", user: "bob" }, { metadata: { t: "ts-refused" } }), BadRequestError);
    assert.deepEqual(await Sandbox.list({ metadata: { t: "ts-refused" } }), []);
  });
});
