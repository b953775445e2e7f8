// The wrapped tools outside a loop: what the model is given for invalid
// arguments and when Runtime cannot be reached. No server needed.
import assert from "node:assert/strict";
import { test } from "node:test";

import { TOOL_NAMES, type ToolResult } from "withruntime/tools";

import { runtimeTools, type RuntimeTool } from "../src/index.js";

const opts = { toolCallId: "c1", messages: [] };

async function call(t: RuntimeTool, input: Record<string, unknown>) {
  const output = (await t.execute!(input, opts)) as ToolResult;
  return { output, model: await t.toModelOutput!({ toolCallId: "c1", input, output }) };
}

test("the four tools, keyed by name", () => {
  assert.deepEqual(Object.keys(runtimeTools(() => assert.fail("no call"))), [...TOOL_NAMES]);
});

test("invalid arguments are an error-text result that says what to fix, before any sandbox is asked for", async () => {
  const tools = runtimeTools(() => assert.fail("no sandbox wanted for invalid arguments"));
  const { output, model } = await call(tools.runtime_exec, { command: "" });
  assert.equal(output.isError, true);
  assert.deepEqual(model, { type: "error-text", value: output.text });
  assert.match(output.text, /"command" is empty/);
});

test("Runtime failing is an error-text result for the model", async () => {
  const tools = runtimeTools(() => Promise.reject(new Error("connection refused")));
  const { output, model } = await call(tools.runtime_exec, { command: "true", cwd: "", timeoutSeconds: 0 });
  assert.equal(output.isError, true);
  assert.equal(model.type, "error-text");
  assert.match(output.text, /could not be reached: .*connection refused/);
});
