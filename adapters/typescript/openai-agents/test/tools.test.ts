// The wrapped tools outside a loop: what the model is given for invalid
// arguments and when Runtime cannot be reached. No server needed.
import assert from "node:assert/strict";
import { test } from "node:test";

import { RunContext } from "@openai/agents-core";
import { TOOL_NAMES } from "withruntime/tools";

import { runtimeTools } from "../src/index.js";

test("the four tools, in order, strict", () => {
  const tools = runtimeTools(() => assert.fail("no call"));
  assert.deepEqual(
    tools.map((t) => t.name),
    [...TOOL_NAMES],
  );
  assert.ok(tools.every((t) => t.type === "function" && t.strict));
});

test("invalid arguments are a result that says what to fix, before any sandbox is asked for", async () => {
  const [exec] = runtimeTools(() => assert.fail("no sandbox wanted for invalid arguments"));
  const out = await exec!.invoke(new RunContext(), JSON.stringify({ command: "", cwd: "", timeoutSeconds: 0 }));
  assert.match(String(out), /"command" is empty/);
});

test("Runtime failing is a result for the model", async () => {
  const [exec] = runtimeTools(() => Promise.reject(new Error("connection refused")));
  const out = await exec!.invoke(new RunContext(), JSON.stringify({ command: "true", cwd: "", timeoutSeconds: 0 }));
  assert.match(String(out), /could not be reached: .*connection refused/);
});
