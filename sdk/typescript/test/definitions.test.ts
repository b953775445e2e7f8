// The tool definitions are one contract for every SDK: the package ships
// copies of the Go SDK's golden files (sdk/go/tools/testdata), and these
// tests check the copies, the tools and the provider declarations are
// byte-identical to them.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import {
  anthropic,
  definitions,
  gemini,
  openAIChat,
  openAIResponses,
  sandboxTools,
  TOOL_NAMES,
} from "withruntime/tools";
import type { Sandbox } from "withruntime";

const pkg = new URL("../../", import.meta.url); // build-test/test/ -> the package
const goldenDir = new URL("../go/tools/testdata/", pkg);

function golden(name: string): Buffer {
  return readFileSync(new URL(`${name}.golden`, goldenDir));
}

/** JSON as the Go goldens are written: two-space indent, no HTML escaping, a final newline. */
function goJSON(v: unknown): Buffer {
  return Buffer.from(JSON.stringify(v, null, 2) + "\n", "utf8");
}

test("the package's definition files are byte-identical to the Go goldens", () => {
  for (const name of TOOL_NAMES) {
    const copy = readFileSync(new URL(`definitions/${name}.json`, pkg));
    assert.ok(copy.equals(golden(name)), `definitions/${name}.json differs from sdk/go/tools/testdata/${name}.golden; run npm run sync-definitions`);
  }
});

test("definitions() and the tools serialize to the Go goldens, in order exec, read, write, list", () => {
  assert.deepEqual(TOOL_NAMES, ["runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files"]);
  const tools = sandboxTools({} as Sandbox);
  assert.deepEqual(
    tools.map((t) => t.name),
    TOOL_NAMES,
  );
  definitions().forEach((d, i) => {
    assert.ok(goJSON(d).equals(golden(d.name)), `definitions()[${i}] (${d.name}) differs from its golden`);
    const t = tools[i]!;
    const declared = { name: t.name, description: t.description, inputSchema: t.inputSchema };
    assert.ok(goJSON(declared).equals(golden(t.name)), `tool ${t.name} differs from its golden`);
    assert.deepEqual(Object.keys(t).sort(), ["description", "execute", "inputSchema", "name"]);
  });
});

test("provider declarations are byte-identical to the Go goldens", () => {
  const tools = sandboxTools({} as Sandbox);
  const cases: [string, unknown][] = [
    ["openai_chat", openAIChat(tools)],
    ["openai_responses", openAIResponses(tools)],
    ["anthropic", anthropic(tools)],
    ["gemini", gemini(tools)],
  ];
  for (const [name, v] of cases) {
    assert.ok(goJSON(v).equals(golden(name)), `${name} differs from sdk/go/tools/testdata/${name}.golden:\n${goJSON(v).toString()}`);
  }
});

test("changing a returned definition changes nothing else", () => {
  const d = definitions()[0]!;
  d.description = "changed";
  d.inputSchema.required.push("x");
  assert.ok(goJSON(definitions()[0]).equals(golden("runtime_exec")));
  assert.ok(goJSON(sandboxTools({} as Sandbox).map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema }))[0]).equals(golden("runtime_exec")));
});
