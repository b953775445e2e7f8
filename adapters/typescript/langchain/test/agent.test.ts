// LangChain.js's own agent loop (createAgent from langchain, a LangGraph
// ReAct graph with a ToolNode) with LangChain's own fake chat model
// (fakeModel from @langchain/core/testing, which supports bindTools),
// scripted to write hello.py and run it against a real Runtime sandbox.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { test } from "node:test";

import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { convertToOpenAITool } from "@langchain/core/utils/function_calling";
import { createAgent } from "langchain";
import { Sandbox } from "withruntime";
import { definitions, type ToolResult } from "withruntime/tools";

import { runtimeTools } from "../src/index.js";

/** The ToolMessage the loop handed back for the tool call id, from the messages the model was sent. */
function toolMessage(messages: BaseMessage[], id: string): ToolMessage {
  const m = messages.find((m): m is ToolMessage => ToolMessage.isInstance(m) && m.tool_call_id === id);
  assert.ok(m, `the model was sent no ToolMessage for ${id}: ${JSON.stringify(messages)}`);
  return m;
}

test("createAgent runs hello.py in a Runtime sandbox through runtime_write_file and runtime_exec", { timeout: 120_000 }, async () => {
  await using sbx = await Sandbox.create({ timeoutSeconds: 300 });

  // The scripted model: each step after the first looks at what the loop handed back.
  const model = fakeModel()
    .respondWithTools([{ id: "call_write", name: "runtime_write_file", args: { path: "hello.py", content: "print(6 * 7)\n" } }])
    .respond((messages) => {
      assert.match(toolMessage(messages, "call_write").text, /hello\.py/);
      return new AIMessage({
        content: "",
        tool_calls: [{ id: "call_exec", name: "runtime_exec", args: { command: "python3 hello.py", cwd: "", timeoutSeconds: 0 }, type: "tool_call" }],
      });
    })
    .respond((messages) => {
      const out = toolMessage(messages, "call_exec").text;
      const stdout = /stdout:\n([\s\S]*?)\nstderr:/.exec(out)?.[1] ?? "(no stdout)";
      return new AIMessage(`hello.py printed ${stdout.trim()}`);
    });

  const tools = runtimeTools(sbx);
  const agent = createAgent({ model, tools, systemPrompt: "Write and run Python in the sandbox with the runtime_* tools." });
  const state = await agent.invoke({ messages: [{ role: "user", content: "Write hello.py that prints 6 * 7, then run it with python3." }] });

  assert.equal(model.callCount, 3);
  const last = state.messages.at(-1)!;
  assert.ok(AIMessage.isInstance(last));
  assert.equal(last.text, "hello.py printed 42");

  // The tool messages in the final state: content for the model, the SDK's ToolResult as artifact.
  const results = state.messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m));
  assert.deepEqual(
    results.map((m) => [m.name, m.tool_call_id]),
    [
      ["runtime_write_file", "call_write"],
      ["runtime_exec", "call_exec"],
    ],
  );
  assert.match(results[1]!.text, /^exit_code: 0\nstdout:\n42\n/);
  const artifact = results[1]!.artifact as ToolResult & { data: { exitCode: number; stdout: string } };
  assert.equal(artifact.isError, false);
  assert.equal(artifact.data.stdout, "42\n");

  // The tools declare the SDK's schemas, unchanged (as a provider would be sent them).
  assert.deepEqual(
    tools.map((t) => {
      const f = convertToOpenAITool(t).function;
      return { name: f.name, description: f.description, inputSchema: f.parameters };
    }),
    definitions(),
  );

  // hello.py is in the sandbox, not on this machine.
  assert.equal(await sbx.files.readText("hello.py"), "print(6 * 7)\n");
  assert.equal(existsSync("hello.py"), false);
});
