// runtime_run_code in the AI SDK's own agent loop (generateText with tools
// and stopWhen) with the AI SDK's own mock model (MockLanguageModelV3),
// against a real code-interpreter sandbox: a variable set in one call is
// used in the next, which draws a matplotlib chart that reaches the model as
// an image part.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { before, test } from "node:test";
import { promisify } from "node:util";

import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { CODE_INTERPRETER_TEMPLATE, Sandbox } from "withruntime";
import { codeDefinitions, RUN_CODE_NAME } from "withruntime/tools";

import { codeInterpreterTools } from "../src/index.js";

type CallOptions = Parameters<MockLanguageModelV3["doGenerate"]>[0];
type GenerateResult = Awaited<ReturnType<MockLanguageModelV3["doGenerate"]>>;
type Output = Extract<CallOptions["prompt"][number], { role: "tool" }>["content"][number] extends infer P
  ? P extends { type: "tool-result"; output: infer O }
    ? O
    : never
  : never;

const usage: GenerateResult["usage"] = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

function runCode(id: string, code: string): GenerateResult {
  return {
    content: [{ type: "tool-call", toolCallId: id, toolName: RUN_CODE_NAME, input: JSON.stringify({ code, language: "" }) }],
    finishReason: { unified: "tool-calls", raw: "tool_calls" },
    usage,
    warnings: [],
  };
}

/** The tool result the loop handed back for call id, from the prompt the model was sent. */
function toolOutput(opts: CallOptions, id: string): Output {
  for (const m of opts.prompt) {
    if (m.role !== "tool") continue;
    for (const p of m.content) if (p.type === "tool-result" && p.toolCallId === id) return p.output;
  }
  assert.fail(`the prompt has no tool result for ${id}: ${JSON.stringify(opts.prompt)}`);
}

function textOf(o: Output): string {
  if (o.type === "text") return o.value;
  if (o.type === "content") return o.value.map((p) => (p.type === "text" ? p.text : "")).join("");
  assert.fail(`unexpected tool output ${JSON.stringify(o)}`);
}

function pngSize(b: Buffer): [number, number] {
  assert.ok(b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), "not a PNG");
  return [b.readUInt32BE(16), b.readUInt32BE(20)];
}

before(async () => {
  // The code-interpreter template, built only if it is missing.
  const env = { ...process.env };
  delete env["WITHRUNTIME_URL"];
  delete env["WITHRUNTIME_API_KEY"];
  const templates = process.env["WITHRUNTIME_TEST_TEMPLATES"] || "/var/lib/withruntime/templates";
  await promisify(execFile)(
    process.env["WITHRUNTIME_BIN"] || "withruntime",
    ["template", "build", "--missing", "--templates-dir", templates, CODE_INTERPRETER_TEMPLATE],
    { env, maxBuffer: 64 << 20 },
  );
});

test("generateText keeps a variable between runtime_run_code calls and gets the chart as an image", { timeout: 180_000 }, async () => {
  await using sbx = await Sandbox.create({ template: CODE_INTERPRETER_TEMPLATE, timeoutSeconds: 300 });

  const model = new MockLanguageModelV3({
    doGenerate: async (opts) => {
      const step = model.doGenerateCalls.length; // this call is already recorded
      if (step === 1) return runCode("call_set", "xs = [3, 1, 4, 1, 5]\nprint(sum(xs))");
      if (step === 2) return runCode("call_chart", "import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3))\nplt.plot(xs)\nplt.show()\nprint(max(xs))");
      const set = textOf(toolOutput(opts, "call_set"));
      const chart = textOf(toolOutput(opts, "call_chart"));
      const first = (s: string) => /stdout:\n(.*)/.exec(s)?.[1] ?? "(no stdout)";
      const line = chart.split("\n").find((l) => l.includes("(image/png")) ?? "no chart";
      return {
        content: [{ type: "text", text: `sum ${first(set)}, max ${first(chart)}; ${line}` }],
        finishReason: { unified: "stop", raw: "stop" },
        usage,
        warnings: [],
      };
    },
  });

  const result = await generateText({
    model,
    tools: codeInterpreterTools(sbx),
    stopWhen: stepCountIs(5),
    prompt: "Sum xs, then chart it.",
  });

  assert.equal(model.doGenerateCalls.length, 3);
  const declared = model.doGenerateCalls[0]!.tools ?? [];
  assert.deepEqual(
    declared.map((t) => (t.type === "function" ? { name: t.name, description: t.description, inputSchema: t.inputSchema } : t)),
    codeDefinitions(),
  );

  // The chart reached the model as an image-data part after the text.
  const out = toolOutput(model.doGenerateCalls[2]!, "call_chart");
  assert.equal(out.type, "content", JSON.stringify(out).slice(0, 300));
  const parts = out.type === "content" ? out.value : [];
  assert.equal(parts.length, 2);
  const image = parts[1]!;
  assert.ok(image.type === "image-data" && image.mediaType === "image/png", JSON.stringify(image).slice(0, 200));
  const [w, h] = pngSize(Buffer.from(image.type === "image-data" ? image.data : "", "base64"));
  assert.ok(w >= 100 && h >= 100, `${w}x${h}`);

  // The final answer came from what the loop handed back: the value the
  // kernel kept, and the chart's line of the summary.
  assert.equal(result.text, `sum 14, max 5; display: image 1 (image/png, ${w}x${h}) attached`);
  const kept = result.steps[1]!.toolResults[0]!.output as { images?: { data: string }[] };
  assert.equal(kept.images?.[0]?.data, image.type === "image-data" ? image.data : "");
});
