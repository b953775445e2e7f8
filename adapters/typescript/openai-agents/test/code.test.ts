// runtime_run_code in the OpenAI Agents SDK's own loop (run() with an Agent)
// with a scripted Model (as in agent.test.ts), against a real
// code-interpreter sandbox: a variable set in one call is used in the next,
// which draws a matplotlib chart that reaches the model as an image.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { before, test } from "node:test";
import { promisify } from "node:util";

import { Agent, run, setTracingDisabled, Usage, type AgentInputItem, type Model, type ModelRequest, type ModelResponse } from "@openai/agents-core";
import { CODE_INTERPRETER_TEMPLATE, Sandbox } from "withruntime";
import { codeDefinitions, RUN_CODE_NAME } from "withruntime/tools";

import { codeInterpreterTools } from "../src/index.js";

setTracingDisabled(true);

const usage = () => new Usage({ requests: 1, inputTokens: 10, outputTokens: 5, totalTokens: 15 });

function runCode(callId: string, code: string): ModelResponse {
  return {
    usage: usage(),
    output: [
      { type: "function_call", id: `fc_${callId}`, callId, name: RUN_CODE_NAME, arguments: JSON.stringify({ code, language: "" }), status: "completed" },
    ],
  };
}

/** The output the loop handed back for callId, from the input the model was sent. */
function callOutput(input: string | AgentInputItem[], callId: string): unknown {
  assert.ok(Array.isArray(input), "the model's input is a list of items");
  for (const item of input) if (item.type === "function_call_result" && item.callId === callId) return item.output;
  assert.fail(`the model's input has no output for ${callId}: ${JSON.stringify(input)}`);
}

type Part = { type: string; text?: string; image?: unknown };

function textOf(out: unknown): string {
  if (typeof out === "string") return out;
  const parts: Part[] = Array.isArray(out) ? (out as Part[]) : [out as Part];
  return parts.map((p) => (p.type === "text" || p.type === "input_text" ? (p.text ?? "") : "")).join("");
}

function pngSize(b: Buffer): [number, number] {
  assert.ok(b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), "not a PNG");
  return [b.readUInt32BE(16), b.readUInt32BE(20)];
}

class ScriptedModel implements Model {
  readonly requests: ModelRequest[] = [];

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(request);
    if (this.requests.length === 1) return runCode("call_set", "xs = [3, 1, 4, 1, 5]\nprint(sum(xs))");
    if (this.requests.length === 2) return runCode("call_chart", "import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3))\nplt.plot(xs)\nplt.show()\nprint(max(xs))");
    const set = textOf(callOutput(request.input, "call_set"));
    const chart = textOf(callOutput(request.input, "call_chart"));
    const first = (s: string) => /stdout:\n(.*)/.exec(s)?.[1] ?? "(no stdout)";
    const line = chart.split("\n").find((l) => l.includes("(image/png")) ?? "no chart";
    return {
      usage: usage(),
      output: [
        {
          type: "message",
          id: "msg_final",
          role: "assistant",
          status: "completed",
          content: [{ type: "output_text", text: `sum ${first(set)}, max ${first(chart)}; ${line}` }],
        },
      ],
    };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error("ScriptedModel: not streamed");
  }
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

test("run() keeps a variable between runtime_run_code calls and gets the chart as an image", { timeout: 180_000 }, async () => {
  await using sbx = await Sandbox.create({ template: CODE_INTERPRETER_TEMPLATE, timeoutSeconds: 300 });
  const model = new ScriptedModel();
  const agent = new Agent({ name: "analyst", instructions: "Use the kernel.", model, tools: codeInterpreterTools(sbx) });

  const result = await run(agent, "Sum xs, then chart it.");

  assert.equal(model.requests.length, 3);
  const declared = model.requests[0]!.tools;
  assert.deepEqual(
    declared.map((t) => (t.type === "function" ? { name: t.name, description: t.description, inputSchema: t.parameters } : t)),
    codeDefinitions(),
  );

  // The chart reached the model as an image after the text.
  const out = callOutput(model.requests[2]!.input, "call_chart");
  assert.ok(Array.isArray(out) && out.length === 2, JSON.stringify(out).slice(0, 300));
  const image = (out as Part[])[1]!;
  assert.equal(image.type, "input_image", JSON.stringify(image).slice(0, 200));
  const url = (image as { image?: string }).image ?? "";
  const prefix = "data:image/png;base64,";
  assert.ok(url.startsWith(prefix), url.slice(0, 60));
  const [w, h] = pngSize(Buffer.from(url.slice(prefix.length), "base64"));
  assert.ok(w >= 100 && h >= 100, `${w}x${h}`);

  // The final answer came from what the loop handed back.
  assert.equal(result.finalOutput, `sum 14, max 5; display: image 1 (image/png, ${w}x${h}) attached`);
});
