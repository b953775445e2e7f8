// The wrapped tools outside a loop: what the model is given for invalid
// arguments and when Runtime cannot be reached. No server needed.
import assert from "node:assert/strict";
import { test } from "node:test";

import { RuntimeContext } from "@mastra/core/runtime-context";
import { TOOL_NAMES } from "withruntime/tools";

import { runtimeTools, type RuntimeTool } from "../src/index.js";

async function call(t: RuntimeTool, context: Record<string, unknown>): Promise<string> {
  return String(await t.execute!({ context, runtimeContext: new RuntimeContext() }));
}

test("the four tools, keyed by name, with the tools' names as ids", () => {
  const tools = runtimeTools(() => assert.fail("no call"));
  assert.deepEqual(Object.keys(tools), [...TOOL_NAMES]);
  assert.deepEqual(
    Object.values(tools).map((t) => t.id),
    [...TOOL_NAMES],
  );
});

test("invalid arguments are a result that says what to fix, before any sandbox is asked for", async () => {
  const tools = runtimeTools(() => assert.fail("no sandbox wanted for invalid arguments"));
  assert.match(await call(tools.runtime_exec, { command: "", cwd: "", timeoutSeconds: 0 }), /"command" is empty/);
});

test("Runtime failing is a result for the model", async () => {
  const tools = runtimeTools(() => Promise.reject(new Error("connection refused")));
  assert.match(await call(tools.runtime_exec, { command: "true", cwd: "", timeoutSeconds: 0 }), /could not be reached: .*connection refused/);
});
