// The SDK against api/openapi.yaml, the API's one contract.
//
// - The wire types are generated (src/generated/openapi.ts, `npm run
//   generate`): a test runs the generator's --check, so a file older than
//   the document fails; the server is held to the same document by the
//   contract tests of internal/api and internal/itest.
// - The names users know (SandboxInfo, ExecResult, ...) must stay the
//   schemas themselves, not copies: the compile-time checks below.
// - What is still written by hand must cover its schema: the Execution and
//   Result classes every field of theirs, the options of each call every
//   field of its request (or say here why not). These are compile-time
//   checks too: one that fails stops `npm test` at its build, with the
//   missing field's name in the message.
// - Every schema of the document is used by the SDK or listed below with
//   why not, so a new one needs a decision.
//
// The must-show tests prove each check can fail: a generated file lacking a
// field, a hand-written type lacking one, a field added to the document
// reaching SandboxInfo by regenerating alone, a schema nobody handles.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import ts from "typescript";

import type * as sdk from "withruntime";
import type { Schemas } from "withruntime";

const PKG = fileURLToPath(new URL("../../", import.meta.url)); // build-test/test/ -> the package
const SRC = join(PKG, "src");
const GENERATED = join(SRC, "generated", "openapi.ts");
const GENERATE = join(PKG, "scripts", "generate.mjs");
const SPEC = resolve(PKG, "../../api/openapi.yaml");

// -- compile-time checks -------------------------------------------------------

/** Fails to compile unless T is never; the message names what T holds (a missing or mismatched field). */
type Nothing<T extends never> = T;
/** Fails to compile unless T is true. */
type Check<T extends true> = T;
/** A and B are assignable to each other and have the same keys. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? ([keyof A] extends [keyof B] ? ([keyof B] extends [keyof A] ? true : false) : false) : false) : false;
/** The fields of Wire that Hand lacks. */
type Lacks<Hand, Wire> = Exclude<keyof Wire, keyof Hand>;
/** The fields Hand and Wire share whose types differ (undefined aside). */
type Mismatched<Hand, Wire> = {
  [K in keyof Wire & keyof Hand]-?: [Exclude<Wire[K], undefined>] extends [Exclude<Hand[K], undefined>]
    ? [Exclude<Hand[K], undefined>] extends [Exclude<Wire[K], undefined>]
      ? never
      : K
    : K;
}[keyof Wire & keyof Hand];

// The documented names are the schemas, field for field (not hand copies).
export type NamesAreSchemas = [
  Check<Same<sdk.NetworkPolicy, Schemas["NetworkPolicy"]>>,
  Check<Same<sdk.CreateSandboxRequest, Schemas["CreateSandboxRequest"]>>,
  Check<Same<sdk.SandboxWithResult, Schemas["SandboxWithResult"]>>,
  Check<Same<sdk.SandboxInfo, Schemas["Sandbox"]>>,
  Check<Same<sdk.ExecRequest, Schemas["ExecRequest"]>>,
  Check<Same<sdk.ExecResult, Schemas["ExecResult"]>>,
  Check<Same<sdk.ErrorInfo, Schemas["ErrorDetail"]>>,
  Check<Same<sdk.FileInfo, Schemas["FileInfo"]>>,
  Check<Same<sdk.FileListPage, Schemas["FileList"]>>,
  Check<Same<sdk.SecretInfo, Schemas["Secret"]>>,
  Check<Same<sdk.KeyInfo, Schemas["Key"]>>,
  Check<Same<sdk.GroupBy, Schemas["UsageReport"]["groupBy"]>>,
  Check<Same<sdk.UsageRow, Schemas["UsageRow"]>>,
  Check<Same<sdk.UsagePrices, Schemas["UsagePrices"]>>,
  Check<Same<sdk.UsageReport, Schemas["UsageReport"]>>,
  Check<Same<sdk.UsageTrial, Schemas["UsageTrial"]>>,
  Check<Same<sdk.TemplateOrigin, Schemas["TemplateOrigin"]>>,
  Check<Same<sdk.Template, Schemas["Template"]>>,
  Check<Same<sdk.SnapshotInfo, Schemas["Snapshot"]>>,
  Check<Same<sdk.VolumeInfo, Schemas["Volume"]>>,
  Check<Same<sdk.VolumeMount, Schemas["VolumeMount"]>>,
  Check<Same<sdk.ForkAnswer, Schemas["ForkResult"]>>,
  Check<Same<sdk.CodeContext, Schemas["CodeContext"]>>,
  Check<Same<sdk.ExecutionError, Schemas["ExecutionError"]>>,
  Check<Same<sdk.Logs, Schemas["ExecutionLogs"]>>,
  Check<Same<sdk.ResultData, Schemas["ExecutionResult"]>>,
  Check<Same<sdk.ExecutionData, Schemas["Execution"]>>,
  // The stream events leave out the heartbeat, which the SDK skips.
  Check<Same<Omit<sdk.ExecEvent, "type">, Omit<Schemas["Event"], "type">>>,
  Check<Same<sdk.ExecEvent["type"] | "heartbeat", Schemas["Event"]["type"]>>,
  Check<Same<Omit<sdk.TemplateEvent, "type">, Omit<Schemas["TemplateEvent"], "type">>>,
  Check<Same<sdk.TemplateEvent["type"] | "heartbeat", Schemas["TemplateEvent"]["type"]>>,
  // A watch's events leave out ready (read before watch resolves), the
  // heartbeat, and the error line with its code and message (thrown).
  Check<Same<Omit<sdk.WatchEvent, "type">, Omit<Schemas["WatchEvent"], "type" | "code" | "message">>>,
  Check<Same<sdk.WatchEvent["type"] | "ready" | "heartbeat" | "error", Schemas["WatchEvent"]["type"]>>,
];

// The classes over a code cell's answer hold every field of their schema, of
// its type (results become Result objects; the flags are false when absent).
export type ClassesCoverAnswers = [
  Nothing<Lacks<sdk.Execution, Schemas["Execution"]>>,
  Nothing<Mismatched<sdk.Execution, Omit<Schemas["Execution"], "results">>>,
  Check<Same<sdk.Execution["results"][number], sdk.Result>>,
  Nothing<Lacks<sdk.Result, Schemas["ExecutionResult"]>>,
  Nothing<Mismatched<sdk.Result, Schemas["ExecutionResult"]>>,
];

// Each call's options take every field of its request, of its type, except
// those the SDK fills from its other arguments or does not offer yet (named
// here with why: a new field of a request fails until it is handled).
export type OptionsCoverRequests = [
  // exec: Sandbox.createAndExec and runOnce send their command argument.
  Nothing<Lacks<sdk.SandboxOptions, Omit<Schemas["CreateSandboxRequest"], "exec">>>,
  Nothing<Mismatched<sdk.SandboxOptions, Schemas["CreateSandboxRequest"]>>,
  // name: createKey's first argument.
  Nothing<Lacks<sdk.CreateKeyOptions, Omit<Schemas["CreateKeyRequest"], "name">>>,
  Nothing<Mismatched<sdk.CreateKeyOptions, Schemas["CreateKeyRequest"]>>,
  // code: runCode's first argument; contextId: the option context (a CodeContext or its id).
  Nothing<Lacks<sdk.RunCodeOptions, Omit<Schemas["RunCodeRequest"], "code" | "contextId">>>,
  Nothing<Mismatched<sdk.RunCodeOptions, Schemas["RunCodeRequest"]>>,
  Nothing<Lacks<sdk.CreateContextOptions, Schemas["CreateContextRequest"]>>,
  Nothing<Mismatched<sdk.CreateContextOptions, Schemas["CreateContextRequest"]>>,
  Nothing<Lacks<sdk.SnapshotOptions, Schemas["CreateSnapshotRequest"]>>,
  Nothing<Mismatched<sdk.SnapshotOptions, Schemas["CreateSnapshotRequest"]>>,
  // count: fork's first argument.
  Nothing<Lacks<sdk.ForkOptions, Omit<Schemas["ForkRequest"], "count">>>,
  Nothing<Mismatched<sdk.ForkOptions, Schemas["ForkRequest"]>>,
  // Requests made from positional arguments: the fields they send, and
  // those not offered yet. setSecret: owner (an administrator storing a
  // tenant's secret) is not offered. setTimeout: onLeaseEnd, pauseMode and
  // autoResume are set at create only. createTemplate: private (a template only its
  // key sees; a tenant key's always are) is not offered yet. Files.mkdir/
  // mkdirAll, rename, resume, createVolume: all their fields.
  Nothing<Exclude<keyof Schemas["CreateSecretRequest"], "name" | "value" | "hosts" | "owner">>,
  Nothing<Exclude<keyof Schemas["SetTimeoutRequest"], "timeoutSeconds" | "onLeaseEnd" | "pauseMode" | "autoResume">>,
  Nothing<Exclude<keyof Schemas["ResumeRequest"], "timeoutSeconds">>,
  Nothing<Lacks<sdk.PauseOptions, Schemas["PauseRequest"]>>,
  Nothing<Mismatched<sdk.PauseOptions, Schemas["PauseRequest"]>>,
  Nothing<Exclude<keyof Schemas["MkdirRequest"], "path" | "parents">>,
  Nothing<Exclude<keyof Schemas["RenameRequest"], "from" | "to">>,
  // createTemplate: name and fromImage its arguments, start its option;
  // private is not offered by the SDK yet.
  Nothing<Exclude<keyof Schemas["CreateTemplateRequest"], "name" | "fromImage" | "private" | "start">>,
  Nothing<Mismatched<sdk.TemplateOptions, Pick<Schemas["CreateTemplateRequest"], "start">>>,
  Nothing<Exclude<keyof Schemas["CreateVolumeRequest"], "name" | "sizeMiB">>,
];

// -- the schemas the SDK uses ---------------------------------------------------

/** Schemas of the document the SDK does not use, with why. */
const NOT_USED: Record<string, string> = {
  ServerHealth: "GET /v1/health: the SDK has no health call (monitors and the CLI use it)",
  BuildVersion: "part of ServerHealth",
  LeaderStatus: "part of ServerHealth",
  PoolStatus: "part of ServerHealth",
  SandboxEvent: "the first line of a create-with-exec's NDJSON answer; the SDK asks for the collected answer (SandboxWithResult)",
  DeviceRequest: "a device login waiting for approval: the dashboard's administrator page, not a client's",
  DeviceApproveRequest: "the dashboard's approval of a device login",
  DeviceDenyRequest: "the dashboard's denial of a device login",
  UpdateContextRequest: "PATCH .../contexts/{contextId}: moves a kernel's cwd, for the E2B facade (E2B's kernels start in /home/user); the SDK gives a context its cwd when it creates it",
};

/** The names of components.schemas in a generated file's text. */
function schemaNames(text: string): string[] {
  const sf = ts.createSourceFile("openapi.ts", text, ts.ScriptTarget.Latest);
  for (const st of sf.statements) {
    if (!ts.isInterfaceDeclaration(st) || st.name.text !== "components") continue;
    for (const m of st.members) {
      if (ts.isPropertySignature(m) && m.name.getText(sf) === "schemas" && m.type && ts.isTypeLiteralNode(m.type)) {
        return m.type.members.map((s) => (s.name as ts.Identifier).text);
      }
    }
  }
  throw new Error("no components.schemas in the generated file");
}

/** The schemas the SDK's code names (Schemas["X"] or Schema<"X">, in code: not in comments). */
function usedSchemas(): Set<string> {
  const used = new Set<string>();
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? (e.name === "generated" ? [] : walk(join(dir, e.name))) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
    );
  for (const file of walk(SRC)) {
    const sf = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
    const literal = (t: ts.TypeNode | undefined) =>
      t && ts.isLiteralTypeNode(t) && ts.isStringLiteral(t.literal) ? t.literal.text : undefined;
    const visit = (n: ts.Node): void => {
      let name: string | undefined;
      if (ts.isIndexedAccessTypeNode(n) && n.objectType.getText(sf) === "Schemas") name = literal(n.indexType);
      if (ts.isTypeReferenceNode(n) && n.typeName.getText(sf) === "Schema") name = literal(n.typeArguments?.[0]);
      if (ts.isExpressionWithTypeArguments(n) && n.expression.getText(sf) === "Schema") name = literal(n.typeArguments?.[0]); // interface X extends Schema<"X">
      if (name) used.add(name);
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return used;
}

/** What is wrong with the SDK's use of the schemas, one line each. */
export function coverage(names: string[], used: Set<string>, notUsed: Record<string, string>): string[] {
  const problems: string[] = [];
  for (const n of names) {
    if (!used.has(n) && !(n in notUsed)) {
      problems.push(`schema ${n} of api/openapi.yaml is used nowhere in the SDK: name it in a type or a call, or add it to NOT_USED with why`);
    }
    if (used.has(n) && n in notUsed) problems.push(`schema ${n} is used, yet NOT_USED says it is not`);
  }
  for (const n of [...used, ...Object.keys(notUsed)]) {
    if (!names.includes(n)) problems.push(`schema ${n} is not in api/openapi.yaml (renamed or removed?)`);
  }
  return problems;
}

// -- compiling in memory --------------------------------------------------------

/** Parsed files that no test overrides (the libraries, @types/node), shared by the compiles. */
const parsed = new Map<string, ts.SourceFile | undefined>();

/**
 * Type-checks root with the tests' compiler options, as if the files in
 * override (paths relative to the package) held the given text, and
 * returns the errors as "file: message". The tests import the SDK as
 * "withruntime", so they see its declarations in dist/. Declaration files
 * are not checked themselves (skipLibCheck), only their use.
 */
function typeErrors(root: string, override: Record<string, string>): string[] {
  const cfg = ts.getParsedCommandLineOfConfigFile(join(PKG, "tsconfig.test.json"), {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
    },
  });
  assert.ok(cfg, "tsconfig.test.json did not parse");
  const options = { ...cfg.options, noEmit: true, skipLibCheck: true };
  const files = new Map(Object.entries(override).map(([p, text]) => [join(PKG, p), text]));
  const host = ts.createCompilerHost(options);
  const { getSourceFile, readFile, fileExists } = host;
  host.getSourceFile = (f, lang, ...rest) => {
    if (files.has(f)) return ts.createSourceFile(f, files.get(f)!, lang);
    if (!parsed.has(f)) parsed.set(f, getSourceFile.call(host, f, lang, ...rest));
    return parsed.get(f);
  };
  host.readFile = (f) => files.get(f) ?? readFile.call(host, f);
  host.fileExists = (f) => files.has(f) || fileExists.call(host, f);
  const program = ts.createProgram([join(PKG, root)], options, host);
  return ts
    .getPreEmitDiagnostics(program)
    .map((d) => `${d.file ? relative(PKG, d.file.fileName) : "(options)"}: ${ts.flattenDiagnosticMessageText(d.messageText, " ")}`);
}

/** Runs scripts/generate.mjs with args; its exit code and what it printed. */
function generate(...args: string[]): { code: number | null; out: string } {
  const r = spawnSync(process.execPath, [GENERATE, ...args], { encoding: "utf8" });
  return { code: r.status, out: r.stdout + r.stderr };
}

// -- the tests ------------------------------------------------------------------

test("src/generated/openapi.ts is what api/openapi.yaml generates (npm run generate -- --check)", () => {
  const r = generate("--check");
  assert.equal(r.code, 0, r.out);
});

test("must-show: a generated file that lacks a field of the document fails the check, naming the line", () => {
  const dir = mkdtempSync(join(tmpdir(), "withruntime-contract-"));
  try {
    const stale = join(dir, "openapi.ts");
    const text = readFileSync(GENERATED, "utf8");
    assert.match(text, /^ {12}imageBytes\?: number;$/m);
    writeFileSync(stale, text.replace(/^ {12}imageBytes\?: number;\n/m, "")); // Sandbox.imageBytes, as if the server had gained it since
    const r = generate("--check", "--out", stale);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /is stale/);
    assert.match(r.out, /generated: imageBytes\?: number;/);
    assert.match(r.out, /run `npm run generate`/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("must-show: a field added to a response in api/openapi.yaml reaches SandboxInfo by regenerating alone", async () => {
  const spec = readFileSync(SPEC, "utf8");
  // Sandbox's first property is id; add one before it.
  const anchor = /(\n {4}Sandbox:\n(?: {6}.*\n)*? {6}properties:\n)/;
  assert.match(spec, anchor);
  const grown = spec.replace(
    anchor,
    "$1        snapshotCount:\n          type: integer\n          description: How many snapshots the sandbox has.\n",
  );
  const { generate: gen } = (await import(new URL("../../scripts/generate.mjs", import.meta.url).href)) as {
    generate(specText: string): Promise<string>;
  };
  const probe = {
    "test/probe.ts": `import type { SandboxInfo } from "withruntime";\nexport const n: number | undefined = ({} as SandboxInfo).snapshotCount;\n`,
  };
  const before = typeErrors("test/probe.ts", probe);
  assert.equal(before.length, 1, before.join("\n"));
  assert.match(before[0]!, /Property 'snapshotCount' does not exist on type 'SandboxInfo'/);
  const after = typeErrors("test/probe.ts", { ...probe, "dist/generated/openapi.d.ts": await gen(grown) });
  assert.deepEqual(after, []);
});

test("must-show: a hand-written type that lacks a field of its schema fails the compile-time checks, naming the field", () => {
  const code = readFileSync(join(PKG, "dist", "code.d.ts"), "utf8");
  const sandbox = readFileSync(join(PKG, "dist", "sandbox.d.ts"), "utf8");
  assert.match(code, /^ {4}notice: string;$/m);
  assert.match(sandbox, /^ {4}cpu\?: number;$/m);
  const errs = typeErrors("test/contract.test.ts", {
    "dist/code.d.ts": code.replace(/^ {4}notice: string;\n/m, ""), // Execution without notice
    "dist/sandbox.d.ts": sandbox.replace(/^ {4}cpu\?: number;\n/m, ""), // SandboxOptions without cpu
  });
  assert.equal(errs.length, 2, errs.join("\n"));
  assert.ok(errs.every((e) => e.startsWith(join("test", "contract.test.ts"))), errs.join("\n"));
  assert.ok(errs.some((e) => e.includes(`Type '"notice"' does not satisfy the constraint 'never'`)), errs.join("\n"));
  assert.ok(errs.some((e) => e.includes(`Type '"cpu"' does not satisfy the constraint 'never'`)), errs.join("\n"));
});

test("every schema of api/openapi.yaml is used by the SDK or listed with why not", () => {
  const names = schemaNames(readFileSync(GENERATED, "utf8"));
  assert.ok(names.length > 40, `found only ${names.length} schemas`);
  assert.deepEqual(coverage(names, usedSchemas(), NOT_USED), []);
});

test("must-show: a schema the SDK neither uses nor lists is reported", () => {
  const names = schemaNames(readFileSync(GENERATED, "utf8"));
  const problems = coverage([...names, "Hologram"], usedSchemas(), NOT_USED);
  assert.deepEqual(problems, [
    "schema Hologram of api/openapi.yaml is used nowhere in the SDK: name it in a type or a call, or add it to NOT_USED with why",
  ]);
});
