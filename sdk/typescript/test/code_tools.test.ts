// runtime_run_code (codeInterpreterTools): the Go SDK's declaration and
// text byte for byte, checked images in each provider's shape, and a real
// chart from a real kernel (the code-interpreter template is built by
// code.test.ts's before hook, or here, if missing).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { before, describe, test } from "node:test";
import { promisify } from "node:util";

import { CODE_INTERPRETER_TEMPLATE, Execution, Sandbox, type ExecutionData } from "withruntime";
import {
  anthropicToolResult,
  codeDefinitions,
  codeInterpreterTools,
  dispatch,
  geminiParts,
  openAIResponsesOutput,
  RUN_CODE_NAME,
  summarizeExecution,
} from "withruntime/tools";

const pkg = new URL("../../", import.meta.url);
const goldenDir = new URL("../go/tools/testdata/", pkg);

test("runtime_run_code's declaration is the Go golden", () => {
  const golden = readFileSync(new URL(`${RUN_CODE_NAME}.golden`, goldenDir));
  assert.ok(Buffer.from(JSON.stringify(codeDefinitions()[0], null, 2) + "\n").equals(golden));
  assert.ok(readFileSync(new URL(`definitions/${RUN_CODE_NAME}.json`, pkg)).equals(golden));
});

test("the text of an Execution is the Go golden", () => {
  const ex = Execution.fromJSON(JSON.parse(readFileSync(new URL("run_code_execution.json", goldenDir), "utf8")) as ExecutionData);
  const [text, images] = summarizeExecution(ex);
  const imgs = images.map((i) => `${i.mimeType} ${i.width}x${i.height} ${Buffer.from(i.data, "base64").length} bytes`);
  const got = text + "\n--- images ---\n" + imgs.join("\n") + "\n";
  assert.equal(got, readFileSync(new URL("run_code_summary.golden", goldenDir), "utf8"));
});

const run = promisify(execFile);

describe("runtime_run_code against a real kernel", () => {
  before(async () => {
    const env = { ...process.env };
    delete env["WITHRUNTIME_URL"];
    delete env["WITHRUNTIME_API_KEY"];
    const templates = process.env["WITHRUNTIME_TEST_TEMPLATES"] || "/var/lib/withruntime/templates";
    await run(process.env["WITHRUNTIME_BIN"] || "withruntime", ["template", "build", "--missing", "--templates-dir", templates, CODE_INTERPRETER_TEMPLATE], {
      env,
      maxBuffer: 64 << 20,
    });
  });

  test("a chart comes back as an image in each provider's shape", async () => {
    await using sbx = await Sandbox.create({ template: CODE_INTERPRETER_TEMPLATE, timeoutSeconds: 300 });
    const tools = codeInterpreterTools(sbx);
    for (const args of [`{"code": "", "language": ""}`, `{"code": "1", "language": "ruby"}`]) {
      const r = await dispatch(tools, RUN_CODE_NAME, args);
      assert.ok(r.isError, r.text);
    }
    let res = await dispatch(tools, RUN_CODE_NAME, { code: "import pandas as pd\ndf = pd.DataFrame({'y': [1, 4, 9]})\nprint(len(df))", language: "" });
    assert.ok(!res.isError && res.text.includes("stdout:\n3"), res.text);
    res = await dispatch(tools, RUN_CODE_NAME, { code: "import matplotlib.pyplot as plt\nplt.plot(df['y']); plt.show()", language: "python" });
    assert.ok(!res.isError && res.images?.length === 1 && res.text.includes("image 1 (image/png"), res.text);
    const img = res.images![0]!;
    const b = Buffer.from(img.data, "base64");
    assert.equal(b.subarray(1, 4).toString(), "PNG");
    assert.equal(b.readUInt32BE(16), img.width);
    assert.ok(img.width >= 100);
    const a = anthropicToolResult(res, "toolu_1") as { content: unknown[] };
    assert.deepEqual(a.content[1], { type: "image", source: { type: "base64", media_type: "image/png", data: img.data } });
    const o = openAIResponsesOutput(res, "call_1") as { output: unknown[] };
    assert.deepEqual(o.output[1], { type: "input_image", image_url: `data:image/png;base64,${img.data}` });
    const g = geminiParts(res, RUN_CODE_NAME, "fc_1");
    assert.deepEqual(g[1], { inlineData: { mimeType: "image/png", data: img.data } });
    res = await dispatch(tools, RUN_CODE_NAME, { code: "1/0", language: "" });
    assert.ok(!res.isError && res.text.includes("error: ZeroDivisionError"), res.text);
  });
});
