// runtime_run_code in LangChain.js's own agent loop (createAgent) with
// LangChain's own fake chat model (fakeModel), against a real
// code-interpreter sandbox: a variable set in one call is used in the next,
// which draws a matplotlib chart that comes back as an image content block.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { before, test } from "node:test";
import { promisify } from "node:util";

import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { createAgent } from "langchain";
import { CODE_INTERPRETER_TEMPLATE, Sandbox } from "withruntime";
import { RUN_CODE_NAME, type ToolResult } from "withruntime/tools";

import { codeInterpreterTools } from "../src/index.js";

function toolMessage(messages: BaseMessage[], id: string): ToolMessage {
  const m = messages.find((m): m is ToolMessage => ToolMessage.isInstance(m) && m.tool_call_id === id);
  assert.ok(m, `the model was sent no ToolMessage for ${id}: ${JSON.stringify(messages)}`);
  return m;
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

test("createAgent keeps a variable between runtime_run_code calls and gets the chart as an image", { timeout: 180_000 }, async () => {
  await using sbx = await Sandbox.create({ template: CODE_INTERPRETER_TEMPLATE, timeoutSeconds: 300 });

  const chartCode = "import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3))\nplt.plot(xs)\nplt.show()\nprint(max(xs))";
  const model = fakeModel()
    .respondWithTools([{ id: "call_set", name: RUN_CODE_NAME, args: { code: "xs = [3, 1, 4, 1, 5]\nprint(sum(xs))", language: "" } }])
    .respondWithTools([{ id: "call_chart", name: RUN_CODE_NAME, args: { code: chartCode, language: "" } }])
    .respond((messages) => {
      const set = toolMessage(messages, "call_set").text;
      const chart = toolMessage(messages, "call_chart").text;
      const first = (s: string) => /stdout:\n(.*)/.exec(s)?.[1] ?? "(no stdout)";
      const line = chart.split("\n").find((l) => l.includes("(image/png")) ?? "no chart";
      return new AIMessage(`sum ${first(set)}, max ${first(chart)}; ${line}`);
    });

  const agent = createAgent({ model, tools: codeInterpreterTools(sbx), systemPrompt: "Use the kernel." });
  const state = await agent.invoke({ messages: [{ role: "user", content: "Sum xs, then chart it." }] });
  assert.equal(model.callCount, 3);

  const [set, chart] = state.messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m));
  assert.match(set!.text, /^execution_count: 1\nstdout:\n14\n/);
  // The chart is an image content block after the summary's text.
  assert.ok(Array.isArray(chart!.content) && chart!.content.length === 2, JSON.stringify(chart!.content).slice(0, 300));
  const image = chart!.content[1] as { type: string; data?: string; mimeType?: string };
  assert.equal(image.type, "image");
  assert.equal(image.mimeType, "image/png");
  const [w, h] = pngSize(Buffer.from(image.data ?? "", "base64"));
  assert.ok(w >= 100 && h >= 100, `${w}x${h}`);
  assert.equal((chart!.artifact as ToolResult).images?.[0]?.data, image.data);

  // The final answer came from what the loop handed back.
  const last = state.messages.at(-1)!;
  assert.ok(AIMessage.isInstance(last));
  assert.equal(last.text, `sum 14, max 5; display: image 1 (image/png, ${w}x${h}) attached`);
});
