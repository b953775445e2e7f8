// Commands in a sandbox: the requests behind Sandbox.exec, execStream and
// execTo, the NDJSON exec stream read line by line, and the helpers that
// give an event's or a result's exact bytes.
import { apiError, ServerTimeoutError, statusOfCode, WithRuntimeError } from "./errors.js";
import type { CallOptions, HttpClient } from "./http.js";
import type { ExecEvent, ExecRequest, ExecResult, SandboxInfo, Schemas } from "./types.js";
import { runWait } from "./wait.js";

/** The server's default timeout of an exec (seconds). */
export const EXEC_DEFAULT = 120;
const NDJSON = "application/x-ndjson";
/** The type of the line a stream carries after 2 s without another: the server is alive; skipped. */
const HEARTBEAT = "heartbeat";

/** A command to run: a shell command line, an argv, or a whole request. */
export type Command = string | string[] | ExecRequest;

/** Where execTo copies output: anything with a write method, such as process.stdout. */
export interface OutputSink {
  write(chunk: Uint8Array): unknown;
}

/** Options of execTo. */
export interface ExecToOptions extends CallOptions {
  stdout?: OutputSink | ((chunk: Uint8Array) => void);
  stderr?: OutputSink | ((chunk: Uint8Array) => void);
}

export function toRequest(cmd: Command): ExecRequest {
  if (typeof cmd === "string") return { command: cmd };
  if (Array.isArray(cmd)) return { argv: cmd };
  return cmd;
}

function b64(s: string): Uint8Array {
  return new Uint8Array(Buffer.from(s, "base64"));
}

/** A chunk's exact bytes: dataBase64 decoded when the chunk was not UTF-8, else data. */
export function eventData(ev: ExecEvent): Uint8Array {
  if (ev.lossy && ev.dataBase64 !== undefined) return b64(ev.dataBase64);
  return new TextEncoder().encode(ev.data ?? "");
}

/** The exact bytes kept of stdout: stdoutBase64 decoded when the output was not UTF-8, else stdout. */
export function stdoutData(r: ExecResult): Uint8Array {
  if (r.stdoutLossy && r.stdoutBase64 !== undefined) return b64(r.stdoutBase64);
  return new TextEncoder().encode(r.stdout);
}

/** The exact bytes kept of stderr (see stdoutData). */
export function stderrData(r: ExecResult): Uint8Array {
  if (r.stderrLossy && r.stderrBase64 !== undefined) return b64(r.stderrBase64);
  return new TextEncoder().encode(r.stderr);
}

/** The 410 error for a sandbox found stopped, as the server would answer it. */
export function stoppedError(info: SandboxInfo) {
  const code = info.endReason === "lease_ended" ? "lease_ended" : "sandbox_stopped";
  const msg =
    info.endReason === "lease_ended"
      ? `sandbox ${info.id}'s lease ended at ${info.leaseEndsAt} and it was stopped; create a new sandbox (or extend leases with setTimeout before they end)`
      : `sandbox ${info.id} is stopped (${info.endReason ?? "unknown reason"}); create a new sandbox`;
  return apiError(410, code, msg);
}

/** Runs cmd in the sandbox at base (its API path) and returns its collected result (Sandbox.exec). */
export function exec(c: HttpClient, base: string, cmd: Command, opts: CallOptions): Promise<ExecResult> {
  const req = toRequest(cmd);
  return c.json<ExecResult>("POST", base + "/exec", req, opts.signal, runWait(req.timeoutSeconds, EXEC_DEFAULT));
}

/**
 * Runs cmd in the sandbox at base and yields its events (Sandbox.execStream,
 * which documents them). refresh fetches the sandbox's record, to say why a
 * stream that ended without an exit event ended.
 */
export async function* execStream(
  c: HttpClient,
  base: string,
  cmd: Command,
  opts: CallOptions,
  refresh: () => Promise<SandboxInfo>,
): AsyncGenerator<ExecEvent, void, undefined> {
  const resp = await c.request("POST", base + "/exec", {
    body: JSON.stringify(toRequest(cmd)),
    contentType: "application/json",
    accept: NDJSON,
    signal: opts.signal,
  });
  if (!resp.body) throw new WithRuntimeError("withruntime: exec stream had no body");
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let broke: unknown;
  try {
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (err) {
        if (opts.signal?.aborted) throw opts.signal.reason ?? err;
        if (err instanceof ServerTimeoutError) throw err; // the server went silent, not the sandbox
        broke = err;
        break;
      }
      if (chunk.done) break;
      buf += dec.decode(chunk.value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.trim() === "") continue;
        let ev: Schemas["Event"];
        try {
          ev = JSON.parse(line) as Schemas["Event"];
        } catch (err) {
          throw new WithRuntimeError(`withruntime: bad event in exec stream: ${(err as Error).message}`, { cause: err });
        }
        if (ev.type === HEARTBEAT) continue; // the server's sign of life on a quiet stream
        if (ev.type === "exit") {
          if (!ev.result) throw new WithRuntimeError("withruntime: exit event without a result");
          yield ev as ExecEvent;
          return;
        }
        if (ev.type === "error") {
          const e = ev.error ?? { code: "internal", message: "exec failed without a message" };
          throw apiError(statusOfCode(e.code), e.code, e.message);
        }
        yield ev as ExecEvent; // not a heartbeat: checked above
      }
    }
  } finally {
    // Leaving early (break, an error) closes the connection.
    reader.cancel().catch(() => {});
  }
  // The stream ended without an exit event: the sandbox was most likely
  // stopped under the command. Say why if the server knows.
  let info: SandboxInfo | undefined;
  try {
    info = await refresh();
  } catch {
    // unknown: below
  }
  if (info?.state === "stopped") throw stoppedError(info);
  const why = broke instanceof Error ? `: ${broke.message}` : "";
  throw new WithRuntimeError(`withruntime: exec stream ended without an exit event${why} (the sandbox may have been stopped)`, {
    cause: broke,
  });
}

/** Copies a stream's output to opts.stdout and opts.stderr and returns its exit event's result (Sandbox.execTo). */
export async function execTo(events: AsyncIterable<ExecEvent>, opts: ExecToOptions): Promise<ExecResult> {
  const sink = (s: ExecToOptions["stdout"]) =>
    s === undefined ? undefined : typeof s === "function" ? s : (b: Uint8Array) => void s.write(b);
  const out = sink(opts.stdout);
  const err = sink(opts.stderr);
  for await (const ev of events) {
    if (ev.type === "stdout") out?.(eventData(ev));
    else if (ev.type === "stderr") err?.(eventData(ev));
    else if (ev.type === "exit") return ev.result!;
  }
  throw new WithRuntimeError("withruntime: exec stream ended without an exit event");
}
