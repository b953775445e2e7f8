// The SDK's modules import one way: the generated types, the shared types
// and the HTTP core at the bottom, the features (exec, files, code,
// templates, account) above them, Sandbox and Client above those, and the
// package's faces (index.ts, tools/index.ts, cli.ts) on top. These tests
// read every import of src/ (type-only imports and re-exports included, as
// TypeScript's own scanner finds them) and fail on a cycle, naming it.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import ts from "typescript";

const SRC = fileURLToPath(new URL("../../src/", import.meta.url)); // build-test/test/ -> src/

type Graph = Map<string, string[]>;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return e.name.endsWith(".ts") && !e.name.endsWith(".d.ts") ? [p] : [];
  });
}

/** The modules of src/ that file imports (or re-exports from), as paths relative to src/. */
function importsOf(file: string): string[] {
  const info = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
  return info.importedFiles
    .map((f) => f.fileName)
    .filter((m) => m.startsWith("."))
    .map((m) => relative(SRC, resolve(dirname(file), m.replace(/\.js$/, ".ts"))));
}

/** The import graph of src/: each module (relative to src/) and the modules it imports. */
function graph(): Graph {
  return new Map(sources(SRC).map((f) => [relative(SRC, f), importsOf(f)]));
}

/** A cycle of g, as the modules around it with the first repeated at the end, or undefined when there is none. */
export function findCycle(g: Graph): string[] | undefined {
  const done = new Set<string>();
  const path: string[] = [];
  const onPath = new Set<string>();
  const visit = (m: string): string[] | undefined => {
    if (onPath.has(m)) return [...path.slice(path.indexOf(m)), m];
    if (done.has(m)) return undefined;
    path.push(m);
    onPath.add(m);
    for (const dep of g.get(m) ?? []) {
      const c = visit(dep);
      if (c) return c;
    }
    path.pop();
    onPath.delete(m);
    done.add(m);
    return undefined;
  };
  for (const m of [...g.keys()].sort()) {
    const c = visit(m);
    if (c) return c;
  }
  return undefined;
}

test("the SDK's modules import each other one way: no import cycle in src/", () => {
  const g = graph();
  assert.ok(g.size > 15, `found only ${g.size} modules in ${SRC}`);
  for (const [m, deps] of g) {
    for (const d of deps) assert.ok(g.has(d), `${m} imports ${d}, which is not a module of src/`);
  }
  const cycle = findCycle(g);
  assert.equal(cycle, undefined, `import cycle: ${cycle?.join(" -> ")}; move what both need into a module below them (types.ts, http.ts, tools/result.ts)`);
});

test("the cycle check finds a cycle, type-only imports included (so the test above can fail)", () => {
  // The shape the SDK had before: client.ts and sandbox.ts imported each other,
  // and tools/index.ts and tools/providers.ts.
  const before: Graph = new Map([
    ["index.ts", ["client.ts", "sandbox.ts"]],
    ["client.ts", ["sandbox.ts", "http.ts"]],
    ["sandbox.ts", ["client.ts", "files.ts"]],
    ["files.ts", ["client.ts"]],
    ["http.ts", []],
  ]);
  assert.deepEqual(findCycle(before), ["client.ts", "sandbox.ts", "client.ts"]);
  const tools: Graph = new Map([
    ["tools/index.ts", ["tools/providers.ts"]],
    ["tools/providers.ts", ["tools/index.ts"]],
  ]);
  assert.deepEqual(findCycle(tools), ["tools/index.ts", "tools/providers.ts", "tools/index.ts"]);
  assert.equal(findCycle(new Map([["a.ts", ["b.ts"]], ["b.ts", []]])), undefined);
  // A type-only import is an import: the scanner reports it.
  const scanned = ts.preProcessFile(`import type { Client } from "./client.js";\nexport { x } from "./x.js";\n`, true, true);
  assert.deepEqual(
    scanned.importedFiles.map((f) => f.fileName),
    ["./client.js", "./x.js"],
  );
});

test("the bottom layers import nothing above them, and no module imports a face", () => {
  const g = graph();
  const allowed: Record<string, string[]> = {
    "generated/openapi.ts": [],
    "types.ts": ["generated/openapi.ts"],
    "errors.ts": [],
    "wait.ts": ["errors.ts"],
    "http.ts": ["errors.ts", "types.ts", "wait.ts"],
  };
  for (const [m, ok] of Object.entries(allowed)) {
    const extra = (g.get(m) ?? []).filter((d) => !ok.includes(d));
    assert.deepEqual(extra, [], `${m} imports ${extra.join(", ")}; it may import only ${ok.join(", ") || "nothing of src/"}`);
  }
  for (const [m, deps] of g) {
    for (const face of ["index.ts", "tools/index.ts", "cli.ts"]) {
      assert.ok(!deps.includes(face), `${m} imports ${face}, the package's face; import the module that defines what it needs`);
    }
  }
});
