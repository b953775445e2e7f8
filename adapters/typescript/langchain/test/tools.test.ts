// The wrapped tools outside a loop: the ToolMessage for invalid arguments
// and when Runtime cannot be reached. No server needed.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ToolMessage } from "@langchain/core/messages";
import { TOOL_NAMES, type ToolResult } from "withruntime/tools";

import { runtimeTools } from "../src/index.js";

async function call(get: () => never | Promise<never>, args: Record<string, unknown>): Promise<ToolMessage> {
  const [exec] = runtimeTools(get);
  const msg: unknown = await exec!.invoke({ id: "c1", name: "runtime_exec", args, type: "tool_call" });
  assert.ok(ToolMessage.isInstance(msg));
  return msg;
}

test("the four tools, in order", () => {
  assert.deepEqual(
    runtimeTools(() => assert.fail("no call")).map((t) => t.name),
    [...TOOL_NAMES],
  );
});

test("invalid arguments are a ToolMessage that says what to fix, before any sandbox is asked for", async () => {
  const msg = await call(() => assert.fail("no sandbox wanted for invalid arguments"), { command: "", cwd: "", timeoutSeconds: 0 });
  assert.equal(msg.tool_call_id, "c1");
  assert.match(msg.text, /"command" is empty/);
  assert.equal((msg.artifact as ToolResult).isError, true);
});

test("Runtime failing is a ToolMessage for the model", async () => {
  const msg = await call(() => Promise.reject(new Error("connection refused")), { command: "true", cwd: "", timeoutSeconds: 0 });
  assert.match(msg.text, /could not be reached: .*connection refused/);
  assert.equal((msg.artifact as ToolResult).isError, true);
});
