// The OpenAI Agents SDK's own agent loop (run() with an Agent) with a
// scripted Model, as the Agents SDK's own tests use (a class implementing
// its Model interface that answers getResponse from a script), writing
// hello.py and running it against a real Runtime sandbox.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { test } from "node:test";

import { Agent, run, setTracingDisabled, Usage, type AgentInputItem, type Model, type ModelRequest, type ModelResponse } from "@openai/agents-core";
import { Sandbox } from "withruntime";
import { definitions } from "withruntime/tools";

import { runtimeTools } from "../src/index.js";

setTracingDisabled(true); // the default exporter only logs to the console here

function functionCall(callId: string, name: string, args: Record<string, unknown>): ModelResponse {
  return {
    usage: new Usage({ requests: 1, inputTokens: 10, outputTokens: 5, totalTokens: 15 }),
    output: [{ type: "function_call", id: `fc_${callId}`, callId, name, arguments: JSON.stringify(args), status: "completed" }],
  };
}

/** The output the loop handed back for callId, from the input the model was sent. */
function callOutput(input: string | AgentInputItem[], callId: string): string {
  assert.ok(Array.isArray(input), "the model's input is a list of items");
  for (const item of input) {
    if (item.type === "function_call_result" && item.callId === callId) {
      const out: unknown = item.output;
      if (typeof out === "string") return out;
      const text = (out as { type?: string; text?: string } | null)?.type === "text" ? (out as { text: string }).text : undefined;
      assert.ok(typeof text === "string", `output of ${callId}: ${JSON.stringify(out)}`);
      return text;
    }
  }
  assert.fail(`the model's input has no output for ${callId}: ${JSON.stringify(input)}`);
}

/** A Model that plays a script: write hello.py, run it, then answer with what it printed. */
class ScriptedModel implements Model {
  readonly requests: ModelRequest[] = [];

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(request);
    switch (this.requests.length) {
      case 1:
        return functionCall("call_write", "runtime_write_file", { path: "hello.py", content: "print(6 * 7)\n" });
      case 2:
        assert.match(callOutput(request.input, "call_write"), /hello\.py/);
        return functionCall("call_exec", "runtime_exec", { command: "python3 hello.py", cwd: "", timeoutSeconds: 0 });
      default: {
        const out = callOutput(request.input, "call_exec");
        const stdout = /stdout:\n([\s\S]*?)\nstderr:/.exec(out)?.[1] ?? "(no stdout)";
        return {
          usage: new Usage({ requests: 1, inputTokens: 10, outputTokens: 5, totalTokens: 15 }),
          output: [
            {
              type: "message",
              id: "msg_final",
              role: "assistant",
              status: "completed",
              content: [{ type: "output_text", text: `hello.py printed ${stdout.trim()}` }],
            },
          ],
        };
      }
    }
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error("ScriptedModel: not streamed");
  }
}

test("run() runs hello.py in a Runtime sandbox through runtime_write_file and runtime_exec", { timeout: 120_000 }, async () => {
  await using sbx = await Sandbox.create({ timeoutSeconds: 300 });
  const model = new ScriptedModel();
  const agent = new Agent({
    name: "coder",
    instructions: "Write and run Python in the sandbox with the runtime_* tools.",
    model,
    tools: runtimeTools(sbx),
  });

  const result = await run(agent, "Write hello.py that prints 6 * 7, then run it with python3.");

  assert.equal(model.requests.length, 3);
  assert.equal(result.finalOutput, "hello.py printed 42");

  // The model was told about the four tools with the SDK's schemas, unchanged, as strict function tools.
  const declared = model.requests[0]!.tools;
  assert.deepEqual(
    declared.map((t) => (t.type === "function" ? { name: t.name, description: t.description, inputSchema: t.parameters } : t)),
    definitions(),
  );
  assert.ok(declared.every((t) => t.type === "function" && t.strict));

  // The run's items hold both calls and their outputs; runtime_exec's says 42.
  const outputs = result.newItems.filter((i) => i.type === "tool_call_output_item").map((i) => String(i.output));
  assert.equal(outputs.length, 2);
  assert.match(outputs[0]!, /hello\.py/);
  assert.match(outputs[1]!, /^exit_code: 0\nstdout:\n42\n/);

  // hello.py is in the sandbox, not on this machine.
  assert.equal(await sbx.files.readText("hello.py"), "print(6 * 7)\n");
  assert.equal(existsSync("hello.py"), false);
});
