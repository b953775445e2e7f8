// Tests that need no server: tool arguments, configuration, errors, what
// Sandbox.create sends.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import {
  APIError,
  BadRequestError,
  Client,
  CostCapError,
  LeaseEndedError,
  NotConfiguredError,
  NotFoundError,
  RangeNotSatisfiableError,
  Sandbox,
  RateLimitedError,
  SandboxStoppedError,
  SpendingLimitError,
  WithRuntimeError,
  apiError,
  statusOfCode,
} from "withruntime";
import { bindTools, dispatch, errorResultFor, resolvePath, sandboxTools } from "withruntime/tools";

const noSandbox = () => {
  throw new Error("the sandbox was asked for despite invalid arguments");
};

test("invalid tool arguments are error results that say what to fix, and never reach the sandbox", async () => {
  const tools = bindTools(noSandbox);
  const cases: [string, unknown, string][] = [
    ["runtime_exec", { cwd: "" }, `missing "command"`],
    ["runtime_exec", {}, `missing "command"`],
    ["runtime_exec", null, `missing "command"`],
    ["runtime_exec", undefined, `missing "command"`],
    ["runtime_exec", { command: null }, `missing "command"`],
    ["runtime_exec", { command: 3 }, `"command" must be a string, not a number`],
    ["runtime_exec", { command: ["ls"] }, `"command" must be a string, not an array`],
    ["runtime_exec", { command: "ls", timeoutSeconds: "30" }, `"timeoutSeconds" must be a whole number, not a string`],
    ["runtime_exec", { command: "ls", timeoutSeconds: 1.5 }, `"timeoutSeconds" must be a whole number, not 1.5`],
    ["runtime_exec", { command: "ls", timeout: 30 }, `unknown field "timeout"`],
    ["runtime_exec", `{"command": "ls"`, "one JSON object"],
    ["runtime_exec", "not json", "one JSON object"],
    ["runtime_exec", [1, 2], "one JSON object (got a JSON array)"],
    ["runtime_exec", 42, "one JSON object"],
    ["runtime_exec", { command: "a\u0000b" }, "NUL"],
    ["runtime_exec", { command: "x".repeat((256 << 10) + 1) }, "over the limit"],
    ["runtime_exec", { command: "\ud800" }, "not valid UTF-8"],
    ["runtime_read_file", { path: 7 }, `"path" must be a string`],
    ["runtime_write_file", { path: "a.txt" }, `missing "content"`],
    ["runtime_list_files", { path: "", depth: 2 }, `unknown field "depth"`],
  ];
  for (const [name, args, want] of cases) {
    const res = await dispatch(tools, name, args);
    assert.equal(res.isError, true, `${name} ${JSON.stringify(args)?.slice(0, 60)}`);
    assert.ok(res.text.startsWith("error: invalid arguments for " + name), res.text.slice(0, 200));
    assert.ok(res.text.includes(want), `${res.text.slice(0, 200)} should contain ${want}`);
    assert.ok(res.text.includes("Expected arguments: {"), res.text.slice(0, 200));
    assert.equal(res.data, undefined);
  }
  // Values the schema allows but the tools refuse are checked before the sandbox is asked for too.
  const refused: [string, unknown, string][] = [
    ["runtime_exec", { command: "  " }, `"command" is empty`],
    ["runtime_exec", { command: "ls", timeoutSeconds: -1 }, `"timeoutSeconds" is -1`],
    ["runtime_exec", { command: "ls", timeoutSeconds: 100000 }, "up to 1800"],
    ["runtime_read_file", { path: "" }, `"path" is empty`],
    ["runtime_write_file", { path: "", content: "x" }, `"path" is empty`],
    ["runtime_write_file", { path: "/workspace/..//workspace", content: "x" }, "is a directory"],
  ];
  for (const [name, args, want] of refused) {
    const res = await dispatch(tools, name, args);
    assert.equal(res.isError, true);
    assert.ok(res.text.includes(want), `${res.text} should contain ${want}`);
  }
  const unknown = await dispatch(tools, "runtime_nope", {});
  assert.equal(unknown.isError, true);
  assert.ok(unknown.text.includes("runtime_exec, runtime_read_file, runtime_write_file, runtime_list_files"), unknown.text);
});

test("arguments may come as JSON text, also encoded twice", async () => {
  let got: unknown;
  const fake = {
    files: {
      writeFile: async (path: string, content: string) => {
        got = { path, content };
        return { path, size: Buffer.byteLength(content), name: "a.txt", type: "file", mode: "0644", modTime: "", uid: 1000, gid: 1000 };
      },
    },
  } as unknown as Sandbox;
  const [, , write] = sandboxTools(fake);
  const args = { path: "a.txt", content: "héllo\n" };
  for (const form of [args, JSON.stringify(args), JSON.stringify(JSON.stringify(args)), ` ${JSON.stringify(args)}\n`]) {
    got = undefined;
    const res = await write!.execute(form);
    assert.equal(res.isError, false, res.text);
    assert.equal(res.text, "wrote 7 bytes to /workspace/a.txt");
    assert.deepEqual(res.data, { path: "/workspace/a.txt", bytes: 7 });
    assert.deepEqual(got, { path: "/workspace/a.txt", content: "héllo\n" });
  }
});

test("paths resolve under /workspace", () => {
  const cases: Record<string, string> = {
    "hello.py": "/workspace/hello.py",
    "./a/../b.txt": "/workspace/b.txt",
    "../../../../etc/pass": "/etc/pass",
    "/tmp//x/": "/tmp/x",
    "..": "/",
  };
  for (const [p, want] of Object.entries(cases)) assert.equal(resolvePath(p), want);
});

test("errors map to the API's codes, by code and else by status", () => {
  const nf = apiError(404, "not_found", "no sandbox");
  assert.ok(nf instanceof NotFoundError && nf instanceof APIError && nf instanceof WithRuntimeError && nf instanceof Error);
  assert.equal(nf.status, 404);
  assert.equal(nf.code, "not_found");
  assert.equal(nf.message, "no sandbox");
  assert.equal(nf.name, "NotFoundError");
  assert.ok(apiError(410, "lease_ended", "x") instanceof LeaseEndedError);
  assert.ok(apiError(410, "sandbox_stopped", "x") instanceof SandboxStoppedError);
  assert.ok(apiError(410, "something_new", "x") instanceof SandboxStoppedError);
  assert.ok(apiError(400, "bad_request", "x") instanceof BadRequestError);
  const other = apiError(418, "http_418", "teapot");
  assert.equal(other.constructor, APIError);
  assert.match(errorResultFor(apiError(410, "lease_ended", "gone")).text, /^error: the sandbox is no longer running \(withruntime: lease_ended \(410\): gone\); its files are gone$/);
  assert.match(errorResultFor(new DOMException("aborted", "AbortError")).text, /cancelled/);
});

/** Runs fn with the environment changed, then restores it. */
function withEnv(vars: Record<string, string | undefined>, fn: () => void): void {
  const saved: Record<string, string | undefined> = {};
  for (const k of Object.keys(vars)) {
    saved[k] = process.env[k];
    if (vars[k] === undefined) delete process.env[k];
    else process.env[k] = vars[k];
  }
  try {
    fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

test("configuration: options, then WITHRUNTIME_URL/WITHRUNTIME_API_KEY, then the config file, else a clear error", () => {
  const dir = mkdtempSync(join(tmpdir(), "withruntime-cfg-"));
  try {
    withEnv({ WITHRUNTIME_URL: undefined, WITHRUNTIME_API_KEY: undefined, XDG_CONFIG_HOME: dir }, () => {
      assert.throws(
        () => new Client(),
        (err: unknown) =>
          err instanceof NotConfiguredError &&
          err.message.includes("WITHRUNTIME_URL") &&
          err.message.includes(join(dir, "withruntime/config.json")) &&
          err.message.includes("withruntime serve"),
      );
      mkdirSync(join(dir, "withruntime"));
      writeFileSync(join(dir, "withruntime/config.json"), JSON.stringify({ url: "http://127.0.0.1:1/", apiKey: "wr_file" }));
      assert.equal(new Client().baseURL, "http://127.0.0.1:1");
      writeFileSync(join(dir, "withruntime/config.json"), "{not json");
      assert.throws(() => new Client(), /not valid JSON/);
    });
    withEnv({ WITHRUNTIME_URL: "http://example.invalid:7780", WITHRUNTIME_API_KEY: "wr_env", XDG_CONFIG_HOME: dir }, () => {
      assert.equal(new Client().baseURL, "http://example.invalid:7780");
      assert.equal(new Client({ baseURL: "https://other.invalid/" }).baseURL, "https://other.invalid");
    });
    withEnv({ WITHRUNTIME_URL: "ftp://nope" }, () => {
      assert.throws(() => new Client(), /must start with http:\/\/ or https:\/\//);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("Sandbox.create sends network only when it differs from the default { internet: false }", async () => {
  const bodies: unknown[] = [];
  const headers: Record<string, string>[] = [];
  const fakeFetch = (async (_url: string | URL | Request, init?: RequestInit) => {
    bodies.push(JSON.parse(String(init?.body)));
    headers.push(init?.headers as Record<string, string>);
    const info = { id: "sbx_test", state: "running", template: "base", createdAt: "", leaseEndsAt: "", cpu: 1, memoryMiB: 512, diskMiB: 2048, metadata: {} };
    return new Response(JSON.stringify(info), { status: 201, headers: { "content-type": "application/json" } });
  }) as typeof fetch;
  const opts = { baseURL: "http://127.0.0.1:1", apiKey: "wr_test", fetch: fakeFetch };
  await Sandbox.create({ ...opts, network: { internet: false }, timeoutSeconds: 1800 });
  await Sandbox.create({ ...opts, network: { internet: false, allow: [] } });
  await Sandbox.create({ ...opts, network: { internet: true } });
  await Sandbox.create({ ...opts, network: { allow: ["api.example.com"] }, template: "base", cpu: 0.5, memoryMiB: 256, env: { A: "1" }, metadata: { k: "v" } });
  assert.deepEqual(bodies, [
    { timeoutSeconds: 1800 },
    {},
    { network: { internet: true } },
    { template: "base", cpu: 0.5, memoryMiB: 256, env: { A: "1" }, metadata: { k: "v" }, network: { allow: ["api.example.com"] } },
  ]);
  assert.equal(headers[0]!["Authorization"], "Bearer wr_test");
});

test("an error answer becomes the APIError of its code; an unreachable server a WithRuntimeError", async () => {
  const fakeFetch = (async () =>
    new Response(JSON.stringify({ error: { code: "lease_ended", message: "its lease ended" } }), { status: 410 })) as typeof fetch;
  await assert.rejects(Sandbox.connect("sbx_x", { baseURL: "http://127.0.0.1:1", fetch: fakeFetch }), (err: unknown) => {
    return err instanceof LeaseEndedError && err.status === 410 && err.code === "lease_ended" && err.message === "its lease ended";
  });
  const plain = (async () => new Response("upstream broke", { status: 502 })) as typeof fetch;
  await assert.rejects(Sandbox.list({ baseURL: "http://127.0.0.1:1", fetch: plain }), (err: unknown) => {
    return err instanceof APIError && err.status === 502 && err.code === "http_502" && err.message === "upstream broke";
  });
  await assert.rejects(Sandbox.list({ baseURL: "http://127.0.0.1:1" }), (err: unknown) => {
    return err instanceof WithRuntimeError && !(err instanceof APIError) && /cannot reach the Runtime server at http:\/\/127\.0\.0\.1:1/.test(err.message);
  });
});

test("requests with Node's fetch use a dispatcher without undici's 300 s header and body timeouts", async () => {
  const original = globalThis.fetch;
  const seen: unknown[] = [];
  globalThis.fetch = ((input: string | URL | Request, init?: RequestInit) => {
    seen.push((init as { dispatcher?: unknown } | undefined)?.dispatcher);
    return original(input, init);
  }) as typeof fetch;
  try {
    const c = new Client({ baseURL: "http://127.0.0.1:1" });
    await original("http://127.0.0.1:1").catch(() => {}); // Node makes its global dispatcher at the first fetch
    await assert.rejects(c.request("GET", "/v1/health"), WithRuntimeError);
    await assert.rejects(c.request("GET", "/v1/health"), WithRuntimeError);
    const global = (globalThis as Record<symbol, unknown>)[Symbol.for("undici.globalDispatcher.1")];
    const d = seen.at(-1) as object | undefined;
    assert.ok(d, "no dispatcher was passed");
    assert.notEqual(d, global);
    assert.equal(d.constructor, (global as object).constructor);
    const optsSym = Object.getOwnPropertySymbols(d).find((s) => s.description === "options");
    if (optsSym) {
      const o = (d as Record<symbol, { headersTimeout?: number; bodyTimeout?: number }>)[optsSym]!;
      assert.equal(o.headersTimeout, 0);
      assert.equal(o.bodyTimeout, 0);
    }
  } finally {
    globalThis.fetch = original;
  }
});

test("cost errors: cost_cap is a BadRequestError, spending_limit a RateLimitedError", () => {
  const cap = apiError(400, "cost_cap", "could cost up to 80000 µ$");
  assert.ok(cap instanceof CostCapError && cap instanceof BadRequestError);
  assert.equal(cap.name, "CostCapError");
  const limit = apiError(429, "spending_limit", "spent");
  assert.ok(limit instanceof SpendingLimitError && limit instanceof RateLimitedError);
  assert.deepEqual([statusOfCode("cost_cap"), statusOfCode("spending_limit")], [400, 429]);
});

test("what create, usage and the key and secret methods send", async () => {
  const sent: { method: string; url: string; body: unknown }[] = [];
  const fakeFetch = (async (url: string | URL | Request, init?: RequestInit) => {
    sent.push({ method: init?.method ?? "GET", url: String(url), body: init?.body == null ? undefined : JSON.parse(String(init.body)) });
    const u = new URL(String(url));
    if (u.pathname === "/v1/usage") {
      const row = { group: "sbx_1", cpuSeconds: 1.5, overheadCpuSeconds: 0.1, billedCpuSeconds: 1.5, gibSeconds: 0.25, costMicros: 12 };
      return Response.json({ from: "", to: "", groupBy: "sandbox", prices: {}, rows: [row], total: { ...row, group: "total" } });
    }
    if (init?.method === "DELETE") return new Response(null, { status: 204 });
    return Response.json({ id: "sbx_test", state: "running", metadata: {}, costMicros: 0 }, { status: 201 });
  }) as typeof fetch;
  const c = new Client({ baseURL: "http://127.0.0.1:1", apiKey: "wr_test", fetch: fakeFetch });
  await c.create({ secrets: ["TOKEN"], maxCostMicros: 5000, network: { allow: ["packages.example"] } });
  await c.create({ secrets: [], maxCostMicros: 0 });
  const rows = await c.usage({ from: new Date(Date.UTC(2026, 0, 1, 1)), to: "2026-01-02", groupBy: "sandbox" });
  assert.deepEqual(rows.map((r) => [r.group, r.costMicros, r.overheadCpuSeconds]), [["sbx_1", 12, 0.1]]);
  await c.usage();
  await c.createKey("ci", { dailyLimitMicros: 5000 });
  await c.createKey("plain");
  await c.revokeKey("key/1");
  await c.deleteSecret("A B");
  await c.setSecret("TOKEN", "v", ["api.example.com"]);
  assert.deepEqual(
    sent.map((s) => [s.method, s.url.replace("http://127.0.0.1:1", ""), s.body]),
    [
      ["POST", "/v1/sandboxes", { secrets: ["TOKEN"], maxCostMicros: 5000, network: { allow: ["packages.example"] } }],
      ["POST", "/v1/sandboxes", {}],
      ["GET", "/v1/usage?from=2026-01-01T01%3A00%3A00.000Z&to=2026-01-02&groupBy=sandbox", undefined],
      ["GET", "/v1/usage", undefined],
      ["POST", "/v1/keys", { name: "ci", dailyLimitMicros: 5000 }],
      ["POST", "/v1/keys", { name: "plain" }],
      ["DELETE", "/v1/keys/key%2F1", undefined],
      ["DELETE", "/v1/secrets/A%20B", undefined],
      ["POST", "/v1/secrets", { name: "TOKEN", value: "v", hosts: ["api.example.com"] }],
    ],
  );
});

/** A fetch that answers the file routes of sandbox sb1: a listing of n entries in pages, and a 10-byte file (ranges honoured, or ignored for path "whole"). */
function fakeFiles(n: number, sent: string[]): typeof fetch {
  const data = new TextEncoder().encode("0123456789");
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(String(input));
    const headers = new Headers(init?.headers);
    const json = (v: unknown, status = 200, h: Record<string, string> = {}) =>
      new Response(JSON.stringify(v), { status, headers: { "Content-Type": "application/json", ...h } });
    if (url.pathname === "/v1/sandboxes/sb1") return json({ id: "sb1", state: "running" });
    if (url.pathname === "/v1/sandboxes/sb1/files/stat") return json({ name: "f", path: "/w/f", type: "file", size: data.length });
    if (url.pathname === "/v1/sandboxes/sb1/files/list") {
      const limit = Number(url.searchParams.get("limit") ?? 1000);
      sent.push(url.searchParams.get("limit") ?? "");
      const cursor = url.searchParams.get("cursor");
      const start = cursor ? Number(Buffer.from(cursor, "base64url").toString().slice("/w/f".length)) + 1 : 0;
      const entries = [];
      for (let i = start; i < n && entries.length < limit; i++) entries.push({ name: `f${i}`, path: `/w/f${i}`, type: "file", size: 0 });
      const truncated = entries.length > 0 && start + entries.length < n;
      const next = truncated ? Buffer.from(entries[entries.length - 1]!.path).toString("base64url") : undefined;
      return json({ entries, truncated, next, total: n });
    }
    if (url.pathname === "/v1/sandboxes/sb1/files") {
      const rng = headers.get("Range");
      sent.push(rng ?? "");
      if (url.searchParams.get("path") === "whole" || !rng) return new Response(data);
      const m = /^bytes=(\d+)-(\d*)$/.exec(rng)!;
      const first = Number(m[1]);
      const last = Math.min(m[2] ? Number(m[2]) : data.length - 1, data.length - 1);
      if (first >= data.length) {
        return json({ error: { code: "range_not_satisfiable", message: "past the end" } }, 416, { "Content-Range": `bytes */${data.length}` });
      }
      return new Response(data.slice(first, last + 1), { status: 206, headers: { "Content-Range": `bytes ${first}-${last}/${data.length}` } });
    }
    return json({ error: { code: "not_found", message: url.pathname } }, 404);
  }) as typeof fetch;
}

test("files.list and entries follow the pages; listPage gives one", async () => {
  const sent: string[] = [];
  const client = new Client({ baseURL: "http://runtime.invalid", apiKey: "wr_x", fetch: fakeFiles(25_001, sent) });
  const sbx = await Sandbox.connect("sb1", { client });
  const all = await sbx.files.list("/w");
  assert.equal(all.length, 25_001);
  assert.equal(all[25_000]!.name, "f25000");
  assert.deepEqual(sent, ["10000", "10000", "10000"]);
  let i = 0;
  for await (const e of sbx.files.entries("/w")) {
    assert.equal(e.name, `f${i}`);
    if (++i === 12_345) break;
  }
  const page = await sbx.files.listPage("/w", { limit: 2 });
  assert.equal(page.entries.length, 2);
  assert.ok(page.truncated && page.next);
  assert.equal(page.total, 25_001);
  assert.equal((await sbx.files.listPage("/w", { limit: 2, cursor: page.next })).entries[0]!.name, "f2");
});

test("files.open asks for a Range; a whole-file answer is cut to it; the end is empty, past it an error", async () => {
  const sent: string[] = [];
  const client = new Client({ baseURL: "http://runtime.invalid", apiKey: "wr_x", fetch: fakeFiles(0, sent) });
  const sbx = await Sandbox.connect("sb1", { client });
  const text = async (path: string, offset?: number, length?: number) =>
    new TextDecoder().decode(await sbx.files.readFile(path, { offset, length }));
  const cases: [string, number | undefined, number | undefined, string, string][] = [
    ["f", 0, 3, "012", "bytes=0-2"],
    ["f", 4, undefined, "456789", "bytes=4-"],
    ["f", 8, 100, "89", "bytes=8-107"],
    ["f", 10, undefined, "", "bytes=10-"],
    ["whole", 3, 4, "3456", "bytes=3-6"],
    ["whole", 7, undefined, "789", "bytes=7-"],
    ["f", 5, 0, "", "bytes=5-5"],
  ];
  for (const [path, offset, length, want, range] of cases) {
    sent.length = 0;
    assert.equal(await text(path, offset, length), want, `${path} ${offset} ${length}`);
    assert.equal(sent[0], range);
  }
  await assert.rejects(text("f", 11), RangeNotSatisfiableError);
  await assert.rejects(text("f", -1), RangeError);
});

test("runtime_list_files shows the first 500 entries and says how many there are", async () => {
  const client = new Client({ baseURL: "http://runtime.invalid", apiKey: "wr_x", fetch: fakeFiles(60_000, []) });
  const sbx = await Sandbox.connect("sb1", { client });
  const ls = sandboxTools(sbx).find((t) => t.name === "runtime_list_files")!;
  const res = await ls.execute({ path: "/w" });
  const lines = res.text.split("\n");
  assert.equal(res.isError, false);
  assert.equal(lines[0], "/w: 60000 entries; the first 500 (by name) are shown");
  assert.equal(lines.length, 502);
  assert.ok(lines[1]!.endsWith("  f0") && lines[500]!.endsWith("  f499"));
  assert.equal(lines[501], "[... 59500 more entries not shown; use runtime_exec with ls or find to see them ...]");
  const data = res.data as { entries: unknown[]; total: number; truncated: boolean };
  assert.deepEqual([data.entries.length, data.total, data.truncated], [500, 60000, true]);
});
