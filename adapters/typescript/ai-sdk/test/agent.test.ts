// The AI SDK's own agent loop (generateText with tools and stopWhen) with
// the AI SDK's own mock model (MockLanguageModelV3 from ai/test), scripted
// to write hello.py and run it, against a real Runtime sandbox.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { test } from "node:test";

import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { Sandbox } from "withruntime";
import { definitions } from "withruntime/tools";

import { runtimeTools } from "../src/index.js";

type CallOptions = Parameters<MockLanguageModelV3["doGenerate"]>[0];
type GenerateResult = Awaited<ReturnType<MockLanguageModelV3["doGenerate"]>>;

const usage: GenerateResult["usage"] = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

function toolCall(id: string, name: string, args: Record<string, unknown>): GenerateResult {
  return {
    content: [{ type: "tool-call", toolCallId: id, toolName: name, input: JSON.stringify(args) }],
    finishReason: { unified: "tool-calls", raw: "tool_calls" },
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

test("generateText runs hello.py in a Runtime sandbox through runtime_write_file and runtime_exec", { timeout: 120_000 }, async () => {
  await using sbx = await Sandbox.create({ timeoutSeconds: 300 });

  // The scripted model: each step looks at what the loop handed back.
  const model = new MockLanguageModelV3({
    doGenerate: async (opts) => {
      const step = model.doGenerateCalls.length; // this call is already recorded
      if (step === 1) {
        return toolCall("call_write", "runtime_write_file", { path: "hello.py", content: "print(6 * 7)\n" });
      }
      if (step === 2) {
        assert.match(toolResultText(opts, "call_write"), /hello\.py/);
        return toolCall("call_exec", "runtime_exec", { command: "python3 hello.py", cwd: "", timeoutSeconds: 0 });
      }
      const out = toolResultText(opts, "call_exec");
      const stdout = /stdout:\n([\s\S]*?)\nstderr:/.exec(out)?.[1] ?? "(no stdout)";
      return {
        content: [{ type: "text", text: `hello.py printed ${stdout.trim()}` }],
        finishReason: { unified: "stop", raw: "stop" },
        usage,
        warnings: [],
      };
    },
  });

  const result = await generateText({
    model,
    tools: runtimeTools(sbx),
    stopWhen: stepCountIs(5),
    prompt: "Write hello.py that prints 6 * 7, then run it with python3.",
  });

  assert.equal(model.doGenerateCalls.length, 3);
  assert.equal(result.text, "hello.py printed 42");
  assert.equal(result.steps.length, 3);

  // The model was told about the four tools with the SDK's schemas, unchanged.
  const declared = model.doGenerateCalls[0]!.tools ?? [];
  assert.deepEqual(
    declared.map((t) => (t.type === "function" ? { name: t.name, description: t.description, inputSchema: t.inputSchema } : t)),
    definitions(),
  );

  // The steps keep the SDK's ToolResult.
  const execResult = result.steps[1]!.toolResults[0]!;
  assert.equal(execResult.toolName, "runtime_exec");
  const output = execResult.output as { isError: boolean; data: { exitCode: number; stdout: string } };
  assert.equal(output.isError, false);
  assert.equal(output.data.exitCode, 0);
  assert.equal(output.data.stdout, "42\n");

  // hello.py is in the sandbox, not on this machine.
  assert.equal(await sbx.files.readText("hello.py"), "print(6 * 7)\n");
  assert.equal(existsSync("hello.py"), false);
});
