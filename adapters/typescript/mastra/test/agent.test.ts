// Mastra's own agent loop (Agent.generate) with the AI SDK v5 mock model
// that Mastra's own tests use (MockLanguageModelV2 from ai/test), scripted
// to write hello.py and run it against a real Runtime sandbox.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { test } from "node:test";

import { Agent } from "@mastra/core/agent";
import { MockLanguageModelV2 } from "ai/test";
import { Sandbox } from "withruntime";
import { definitions } from "withruntime/tools";

import { runtimeTools } from "../src/index.js";

type CallOptions = Parameters<MockLanguageModelV2["doGenerate"]>[0];
type GenerateResult = Awaited<ReturnType<MockLanguageModelV2["doGenerate"]>>;

const usage = { inputTokens: 10, outputTokens: 5, totalTokens: 15 };

function toolCall(id: string, name: string, args: Record<string, unknown>): GenerateResult {
  return {
    content: [{ type: "tool-call", toolCallId: id, toolName: name, input: JSON.stringify(args) }],
    finishReason: "tool-calls",
    usage,
    warnings: [],
  };
}

/** The text of the tool result the loop handed back for call id, from the prompt the model was sent. */
function toolResultText(opts: CallOptions, id: string): string {
  for (const m of opts.prompt) {
    if (m.role !== "tool") continue;
    for (const p of m.content) {
      if (p.type === "tool-result" && p.toolCallId === id) {
        assert.equal(p.output.type, "text", `result of ${id}: ${JSON.stringify(p.output)}`);
        return p.output.type === "text" ? p.output.value : "";
      }
    }
  }
  assert.fail(`the prompt has no tool result for ${id}: ${JSON.stringify(opts.prompt)}`);
}

/** A JSON Schema without what Mastra's zod round trip adds: "$schema" and the safe-integer bounds of an integer. */
function withoutRoundTrip(schema: unknown): unknown {
  const { $schema: _, ...rest } = schema as Record<string, unknown>;
  const props = rest["properties"] as Record<string, Record<string, unknown>>;
  for (const [k, p] of Object.entries(props)) {
    if (p["type"] === "integer" && p["minimum"] === Number.MIN_SAFE_INTEGER && p["maximum"] === Number.MAX_SAFE_INTEGER) {
      const { minimum: _min, maximum: _max, ...keep } = p;
      props[k] = keep;
    }
  }
  return rest;
}

test("Agent.generate runs hello.py in a Runtime sandbox through runtime_write_file and runtime_exec", { timeout: 120_000 }, async () => {
  await using sbx = await Sandbox.create({ timeoutSeconds: 300 });

  // The scripted model: each step looks at what the loop handed back.
  const calls: CallOptions[] = [];
  const model = new MockLanguageModelV2({
    doGenerate: async (opts) => {
      calls.push(opts);
      if (calls.length === 1) {
        return toolCall("call_write", "runtime_write_file", { path: "hello.py", content: "print(6 * 7)\n" });
      }
      if (calls.length === 2) {
        assert.match(toolResultText(opts, "call_write"), /hello\.py/);
        return toolCall("call_exec", "runtime_exec", { command: "python3 hello.py", cwd: "", timeoutSeconds: 0 });
      }
      const out = toolResultText(opts, "call_exec");
      const stdout = /stdout:\n([\s\S]*?)\nstderr:/.exec(out)?.[1] ?? "(no stdout)";
      return { content: [{ type: "text", text: `hello.py printed ${stdout.trim()}` }], finishReason: "stop", usage, warnings: [] };
    },
  });

  const agent = new Agent({
    name: "coder",
    instructions: "Write and run Python in the sandbox with the runtime_* tools.",
    model,
    tools: runtimeTools(sbx),
  });
  const result = await agent.generate("Write hello.py that prints 6 * 7, then run it with python3.", { maxSteps: 5 });

  assert.equal(calls.length, 3);
  assert.equal(result.error, undefined);
  assert.equal(result.text, "hello.py printed 42");

  // The tool results in the final output: runtime_exec's is the SDK's text, 42 in it.
  const results = result.steps.flatMap((s) => s.toolResults).map((r) => [r.payload.toolName, String(r.payload.result)]);
  assert.equal(results.length, 2);
  assert.equal(results[0]![0], "runtime_write_file");
  assert.deepEqual(results[1]![0], "runtime_exec");
  assert.match(results[1]![1]!, /^exit_code: 0\nstdout:\n42\n/);

  // The model was told about the four tools with the SDK's names, descriptions and schemas
  // (Mastra passes a schema through zod, which adds "$schema" and an integer's safe bounds).
  const declared = calls[0]!.tools ?? [];
  assert.deepEqual(
    declared.map((t) => (t.type === "function" ? { name: t.name, description: t.description, inputSchema: withoutRoundTrip(t.inputSchema) } : t)),
    definitions(),
  );

  // hello.py is in the sandbox, not on this machine.
  assert.equal(await sbx.files.readText("hello.py"), "print(6 * 7)\n");
  assert.equal(existsSync("hello.py"), false);
});
