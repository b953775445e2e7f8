// Bounded waits (issue 24, F11): a server that accepted the connection and
// stopped answering is a ServerTimeoutError naming it and the seconds
// waited; a quiet command is not mistaken for one (the server's
// heartbeats). The stopped servers here are local sockets that accept and
// never answer, as a server under SIGSTOP does; the quiet command runs on
// the real server that npm test starts.
import assert from "node:assert/strict";
import { createServer as createHTTPServer, type Server as HTTPServer } from "node:http";
import { createServer, type Server, type Socket } from "node:net";
import { after, describe, test } from "node:test";

import { Client, Sandbox, ServerTimeoutError, DEFAULT_IDLE_TIMEOUT_SECONDS, DEFAULT_RESPONSE_TIMEOUT_SECONDS } from "withruntime";

/** A server that accepts connections and never answers. */
async function silentServer(): Promise<{ url: string; close(): void }> {
  const held: Socket[] = [];
  const srv: Server = createServer((s) => void held.push(s));
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const addr = srv.address() as { port: number };
  return {
    url: `http://127.0.0.1:${addr.port}`,
    close() {
      for (const s of held) s.destroy();
      srv.close();
    },
  };
}

/** An HTTP server that starts an exec stream, then sends heartbeats (path /beats) or nothing. */
async function streamServer(): Promise<{ url: string; close(): void }> {
  const exit = JSON.stringify({
    type: "exit",
    result: { exitCode: 0, stdout: "", stderr: "", stdoutTruncated: false, stderrTruncated: false, stdoutBytes: 5, stderrBytes: 0, timedOut: false, durationMs: 600 },
  });
  const srv: HTTPServer = createHTTPServer((req, res) => {
    if (req.method === "GET") {
      const id = req.url?.split("/").pop() ?? "";
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ id, state: "running" }));
      return;
    }
    res.writeHead(200, { "Content-Type": "application/x-ndjson" });
    res.write(`{"type":"start","pid":3}\n`);
    if (!req.url?.includes("beats")) return; // stalls
    let n = 0;
    const t = setInterval(() => {
      if (++n <= 6) {
        res.write(`{"type":"heartbeat"}\n`);
        return;
      }
      clearInterval(t);
      res.end(`{"type":"stdout","data":"done\\n"}\n${exit}\n`);
    }, 100);
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const addr = srv.address() as { port: number };
  return {
    url: `http://127.0.0.1:${addr.port}`,
    close() {
      srv.closeAllConnections();
      srv.close();
    },
  };
}

describe("bounded waits", () => {
  test("defaults", () => {
    assert.equal(DEFAULT_RESPONSE_TIMEOUT_SECONDS, 60);
    assert.equal(DEFAULT_IDLE_TIMEOUT_SECONDS, 60);
    assert.throws(() => new Client({ baseURL: "http://x", responseTimeoutSeconds: -1 }), TypeError);
  });

  test("a stopped server fails a call within the response timeout, naming it", async () => {
    const s = await silentServer();
    after(() => s.close());
    const c = new Client({ baseURL: s.url, apiKey: "wr_x", responseTimeoutSeconds: 0.5 });
    const t0 = Date.now();
    const err = await c.list().then(
      () => assert.fail("listed sandboxes of a stopped server"),
      (e: unknown) => e,
    );
    const took = Date.now() - t0;
    assert.ok(err instanceof ServerTimeoutError, String(err));
    assert.equal(err.idle, false);
    assert.equal(err.server, s.url);
    assert.equal(err.seconds, 0.5);
    assert.match(err.message, new RegExp(`${s.url} did not answer GET /v1/sandboxes within 0\\.5 s`));
    assert.ok(took >= 450 && took < 5000, `failed after ${took} ms`);
  });

  test("a collected exec waits for its own timeout besides", async () => {
    const s = await silentServer();
    after(() => s.close());
    const c = new Client({ baseURL: s.url, apiKey: "wr_x", responseTimeoutSeconds: 0.5 });
    const sbx = await Sandbox.connect("sbx_1", { client: c }).catch(() => undefined);
    assert.equal(sbx, undefined); // connect itself timed out
    const t0 = Date.now();
    const err = await c.json("POST", "/v1/sandboxes/sbx_1/exec", { command: "true", timeoutSeconds: 1 }, undefined, 1).catch((e: unknown) => e);
    assert.ok(err instanceof ServerTimeoutError && err.seconds === 1.5, String(err));
    assert.ok(Date.now() - t0 >= 1400);
  });

  test("a stream that goes silent fails after the idle timeout; heartbeats keep one alive and are never yielded", async () => {
    const s = await streamServer();
    after(() => s.close());
    const c = new Client({ baseURL: s.url, apiKey: "k", idleTimeoutSeconds: 0.3 });
    const beats = await Sandbox.connect("sbx_beats", { client: c });
    const types: string[] = [];
    for await (const ev of beats.execStream("sleep 1")) types.push(ev.type);
    assert.deepEqual(types, ["start", "stdout", "exit"]);
    const stall = await Sandbox.connect("sbx_stall", { client: c });
    const err = await (async () => {
      for await (const _ of stall.execStream("sleep 100"));
    })().catch((e: unknown) => e);
    assert.ok(err instanceof ServerTimeoutError && err.idle, String(err));
    assert.match(err.message, /sent nothing for 0\.3 s/);
  });
});

describe("a quiet command on the real server", () => {
  test("12 s of silence under a 5 s idle timeout runs to its end", { timeout: 120_000 }, async () => {
    const c = new Client({ idleTimeoutSeconds: 5, responseTimeoutSeconds: 5 });
    await using sbx = await Sandbox.create({ client: c, timeoutSeconds: 300 });
    const types: string[] = [];
    let out = "";
    for await (const ev of sbx.execStream("sleep 12; echo done")) {
      types.push(ev.type);
      if (ev.type === "stdout") out += ev.data;
    }
    assert.equal(out, "done\n");
    assert.ok(!types.includes("heartbeat"), types.join(","));
    const res = await sbx.exec({ command: "sleep 8; echo late", timeoutSeconds: 30 });
    assert.equal(res.stdout, "late\n");
  });
});
