import { Client, type CallOptions, type ClientOptions } from "./client.js";
import {
  CodeInterpreter,
  type CodeContext,
  type CreateContextOptions,
  type Execution,
  type RunCodeOptions,
} from "./code.js";
import { apiError, type APIError, ConflictError, ServerTimeoutError, statusOfCode, WithRuntimeError } from "./errors.js";
import { Files } from "./files.js";
import { BOOT_WAIT, CHECKPOINT_WAIT, runWait } from "./wait.js";

/** The server's default timeout of an exec (seconds). */
const EXEC_DEFAULT = 120;
import type {
  CreateSandboxRequest,
  ExecEvent,
  ExecRequest,
  ExecResult,
  NetworkPolicy,
  SandboxInfo,
  SandboxWithResult,
} from "./types.js";

// Node 20 has Symbol.asyncDispose; older runtimes get a stand-in so that
// `await using` compiled by TypeScript finds the same symbol we define.
(Symbol as { asyncDispose?: symbol }).asyncDispose ??= Symbol("Symbol.asyncDispose");

const NDJSON = "application/x-ndjson";
/** The type of the line a stream carries after 2 s without another: the server is alive; skipped. */
const HEARTBEAT = "heartbeat";

/** Which server to use: a Client, or the options to make one (default: from the environment or the config file). */
export interface ConnectionOptions extends ClientOptions {
  /** The client to use; baseURL, apiKey and fetch are then ignored. */
  client?: Client;
}

/** A new sandbox's settings. Every field is optional: absent ones take the server's defaults. */
export interface SandboxOptions extends ConnectionOptions, CallOptions {
  /** The root filesystem (default "base": Debian with python3, curl, procps). */
  template?: string;
  /** The lease: the server destroys the sandbox this many seconds after creation unless extended with setTimeout (default 300). */
  timeoutSeconds?: number;
  /** vCPUs (default 1; fractions allowed, minimum 0.05). */
  cpu?: number;
  /** Memory in MiB (default 512). */
  memoryMiB?: number;
  /** Cap on writes to the root filesystem, in MiB (default 2048). */
  diskMiB?: number;
  /** Set in every command's environment. */
  env?: Record<string, string>;
  /** Free-form labels, returned as given and usable as list filters. */
  metadata?: Record<string, string>;
  /**
   * The network policy, enforced on the host; default `{ internet: false }`
   * (loopback only). It can change later with setNetwork. It is sent to the
   * server only when it differs from the default.
   */
  network?: NetworkPolicy;
  /**
   * Names of stored secrets (Client.setSecret) the sandbox may use: each is
   * an environment variable holding a placeholder that the egress proxy
   * replaces with the value in HTTPS requests to the secret's hosts, which
   * the network policy must allow. An unknown name is a BadRequestError.
   */
  secrets?: string[];
  /**
   * Refuse the sandbox (CostCapError, whose message gives the worst case) if
   * its first lease could cost more than this many micro-dollars
   * (1 USD = 1,000,000): every vCPU busy plus the memory size, for the whole
   * lease, at the server's prices. 0 or absent: no cap.
   */
  maxCostMicros?: number;
  /**
   * What the lease end does: "stop" (default: the server destroys the
   * sandbox) or "pause" (it is saved whole and kept paused, billed only for
   * its image, until resumed or the server's paused retention ends).
   */
  onLeaseEnd?: "stop" | "pause";
  /** Whether any request while paused resumes the sandbox first (default: true when onLeaseEnd is "pause"). */
  autoResume?: boolean;
}

/** Selects sandboxes for Sandbox.list. Absent fields match everything. */
export interface ListFilter extends ConnectionOptions, CallOptions {
  state?: "starting" | "running" | "paused" | "stopped";
  /** Sandboxes that have every one of these labels. */
  metadata?: Record<string, string>;
}

/** Where execTo copies output: anything with a write method, such as process.stdout. */
export interface OutputSink {
  write(chunk: Uint8Array): unknown;
}

/** Options of execTo. */
export interface ExecToOptions extends CallOptions {
  stdout?: OutputSink | ((chunk: Uint8Array) => void);
  stderr?: OutputSink | ((chunk: Uint8Array) => void);
}

function clientOf(opts: ConnectionOptions): Client {
  return opts.client ?? new Client(opts);
}

function isDefaultNetwork(n: NetworkPolicy | undefined): boolean {
  if (n === undefined) return true;
  for (const [k, v] of Object.entries(n)) {
    if (v === undefined) continue;
    if (k === "internet" && v === false) continue;
    if ((k === "allow" || k === "deny") && Array.isArray(v) && v.length === 0) continue;
    return false;
  }
  return true;
}

/** The create request of opts. */
function createRequest(opts: SandboxOptions): CreateSandboxRequest {
  const req: CreateSandboxRequest = {};
  if (opts.template !== undefined) req.template = opts.template;
  if (opts.timeoutSeconds !== undefined) req.timeoutSeconds = opts.timeoutSeconds;
  if (opts.cpu !== undefined) req.cpu = opts.cpu;
  if (opts.memoryMiB !== undefined) req.memoryMiB = opts.memoryMiB;
  if (opts.diskMiB !== undefined) req.diskMiB = opts.diskMiB;
  if (opts.env !== undefined) req.env = opts.env;
  if (opts.metadata !== undefined) req.metadata = opts.metadata;
  if (!isDefaultNetwork(opts.network)) req.network = opts.network;
  if (opts.secrets !== undefined && opts.secrets.length > 0) req.secrets = opts.secrets;
  if (opts.maxCostMicros) req.maxCostMicros = opts.maxCostMicros;
  if (opts.onLeaseEnd !== undefined) req.onLeaseEnd = opts.onLeaseEnd;
  if (opts.autoResume !== undefined) req.autoResume = opts.autoResume;
  return req;
}

/** A command to run: a shell command line, an argv, or a whole request. */
export type Command = string | string[] | ExecRequest;

function toRequest(cmd: Command): ExecRequest {
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

/**
 * A handle on one sandbox. `kill()` (or leaving an `await using` block)
 * destroys it; otherwise its lease does.
 *
 * ```ts
 * await using sbx = await Sandbox.create({ timeoutSeconds: 600 });
 * const res = await sbx.exec("python3 -c 'print(6*7)'");
 * // res.exitCode === 0, res.stdout === "42\n"; a non-zero exit is a result too
 * ```
 */
export class Sandbox implements AsyncDisposable {
  /** The sandbox's id (sbx_...). */
  readonly id: string;
  /** The client the sandbox was created or connected with. */
  readonly client: Client;
  /** The sandbox's files. */
  readonly files: Files;
  #info: SandboxInfo;
  #killed = false;
  #killing: Promise<void> | undefined;

  /** Use Sandbox.create or Sandbox.connect. */
  constructor(client: Client, info: SandboxInfo) {
    this.client = client;
    this.id = info.id;
    this.#info = info;
    this.files = new Files(client, this.path(""));
  }

  /**
   * Creates a sandbox and resolves once it runs. Throws BadRequestError
   * (invalid options, unknown template or secret), CostCapError (over
   * maxCostMicros), SpendingLimitError (the key's daily limit is reached),
   * UnavailableError (no capacity), UnauthorizedError, NotConfiguredError.
   */
  static async create(opts: SandboxOptions = {}): Promise<Sandbox> {
    const c = clientOf(opts);
    const info = await c.json<SandboxInfo>("POST", "/v1/sandboxes", createRequest(opts), opts.signal, BOOT_WAIT);
    return new Sandbox(c, info);
  }

  /**
   * Creates a sandbox and runs cmd in it, in one request: the server runs
   * it as soon as the sandbox is ready. Resolves to the sandbox (kill
   * it when done) and the command's collected result. Throws create's
   * errors when no sandbox was made (BadRequestError for a bad command
   * too); when the sandbox was made but the command could not run (a cwd
   * that does not exist, an unknown program), the APIError of its code,
   * with the sandbox as its `sandbox` property.
   */
  static async createAndExec(cmd: Command, opts: SandboxOptions = {}): Promise<{ sandbox: Sandbox; result: ExecResult }> {
    const c = clientOf(opts);
    const req = createRequest(opts);
    req.exec = toRequest(cmd);
    const out = await c.json<SandboxWithResult>("POST", "/v1/sandboxes", req, opts.signal, BOOT_WAIT + runWait(req.exec.timeoutSeconds, EXEC_DEFAULT));
    if (!out?.sandbox?.id) throw new WithRuntimeError("withruntime: the create's answer has no sandbox");
    const sandbox = new Sandbox(c, out.sandbox);
    if (out.error) {
      const err = apiError(statusOfCode(out.error.code), out.error.code, out.error.message) as APIError & { sandbox?: Sandbox };
      err.sandbox = sandbox;
      throw err;
    }
    if (!out.result) throw new WithRuntimeError("withruntime: the create's answer has neither a result nor an error");
    return { sandbox, result: out.result };
  }

  /**
   * The one-shot: creates a sandbox with cmd as its first command
   * (createAndExec), destroys the sandbox, and resolves to the command's
   * result. Throws createAndExec's errors (the sandbox destroyed first).
   */
  static async runOnce(cmd: Command, opts: SandboxOptions = {}): Promise<ExecResult> {
    let made: { sandbox: Sandbox; result: ExecResult };
    try {
      made = await Sandbox.createAndExec(cmd, opts);
    } catch (e) {
      await (e as { sandbox?: Sandbox }).sandbox?.kill();
      throw e;
    }
    await made.sandbox.kill();
    return made.result;
  }

  /**
   * A handle on the sandbox id, resumed first if it is paused. Throws
   * NotFoundError, or LeaseEndedError / SandboxStoppedError when it no
   * longer runs, and what resume throws.
   */
  static async connect(id: string, opts: ConnectionOptions & CallOptions = {}): Promise<Sandbox> {
    const c = clientOf(opts);
    const info = await c.json<SandboxInfo>("GET", `/v1/sandboxes/${encodeURIComponent(id)}`, undefined, opts.signal);
    if (info.state === "stopped") throw stoppedError(info);
    const sbx = new Sandbox(c, info);
    if (info.state === "paused") {
      try {
        await sbx.resume(undefined, opts);
      } catch (e) {
        if (!(e instanceof ConflictError)) throw e;
        await sbx.refresh(opts); // resumed meanwhile by another caller
      }
    }
    return sbx;
  }

  /** Lists sandboxes, newest first, stopped ones included unless filtered by state. */
  static async list(filter: ListFilter = {}): Promise<SandboxInfo[]> {
    const c = clientOf(filter);
    const q = new URLSearchParams();
    if (filter.state) q.set("state", filter.state);
    for (const k of Object.keys(filter.metadata ?? {}).sort()) q.set(`metadata.${k}`, filter.metadata![k]!);
    const qs = q.toString();
    const out = await c.json<{ sandboxes: SandboxInfo[] }>("GET", "/v1/sandboxes" + (qs ? "?" + qs : ""), undefined, filter.signal);
    return out.sandboxes;
  }

  /** The sandbox's record as last seen by this handle (at create, connect, refresh or setTimeout). */
  get info(): SandboxInfo {
    return this.#info;
  }

  /** Fetches the sandbox's record from the server. Throws NotFoundError. */
  async refresh(opts: CallOptions = {}): Promise<SandboxInfo> {
    this.#info = await this.client.json<SandboxInfo>("GET", this.path(""), undefined, opts.signal);
    return this.#info;
  }

  /**
   * Saves the running sandbox whole (processes with their memory, files) on
   * the server's host and stops it: it is billed only for its image until
   * resume (or connect, or any request when it has autoResume). Commands
   * running at the pause end with SandboxPausedError; background processes
   * run on after the resume. Throws ConflictError (not running, or already
   * paused), NoSpaceError (no room on the host; it runs on),
   * LeaseEndedError, SandboxStoppedError.
   */
  async pause(opts: CallOptions = {}): Promise<SandboxInfo> {
    this.#info = await this.client.json<SandboxInfo>("POST", this.path("/pause"), {}, opts.signal, CHECKPOINT_WAIT);
    return this.#info;
  }

  /**
   * Boots the paused sandbox where it was, with a lease of timeoutSeconds
   * (default: the lease it was last given). Throws ConflictError (not
   * paused), UnavailableError, SpendingLimitError (it stays paused),
   * SandboxStoppedError (it could not be resumed and was destroyed).
   */
  async resume(timeoutSeconds?: number, opts: CallOptions = {}): Promise<SandboxInfo> {
    const body = timeoutSeconds ? { timeoutSeconds } : {};
    this.#info = await this.client.json<SandboxInfo>("POST", this.path("/resume"), body, opts.signal, CHECKPOINT_WAIT);
    return this.#info;
  }

  /**
   * Moves the end of the sandbox's lease to `seconds` from now (at least 1;
   * the server sets a maximum) and returns the updated record. Throws
   * BadRequestError, LeaseEndedError, SandboxStoppedError.
   */
  async setTimeout(seconds: number, opts: CallOptions = {}): Promise<SandboxInfo> {
    this.#info = await this.client.json<SandboxInfo>("POST", this.path("/timeout"), { timeoutSeconds: seconds }, opts.signal);
    return this.#info;
  }

  /**
   * The sandbox's effective (normalized) network policy, as the host
   * enforces it now. Throws NotFoundError, ConflictError (still starting),
   * LeaseEndedError, SandboxStoppedError.
   */
  async network(opts: CallOptions = {}): Promise<NetworkPolicy> {
    return this.client.json<NetworkPolicy>("GET", this.path("/network"), undefined, opts.signal);
  }

  /**
   * Replaces the sandbox's network policy and returns the effective one. It
   * applies to new connections and DNS queries; open connections stay open.
   * Throws BadRequestError (an invalid policy; the message says what is
   * wrong), LeaseEndedError, SandboxStoppedError.
   */
  async setNetwork(policy: NetworkPolicy, opts: CallOptions = {}): Promise<NetworkPolicy> {
    return this.client.json<NetworkPolicy>("PUT", this.path("/network"), policy, opts.signal);
  }

  /**
   * Destroys the sandbox and everything in it. Safe to call more than once:
   * after the first success it returns at once. A sandbox that is already
   * gone (its lease ended, or another client destroyed it) counts as
   * killed. Without a signal it gives up after 30 seconds.
   */
  async kill(opts: CallOptions = {}): Promise<void> {
    if (this.#killed) return;
    this.#killing ??= (async () => {
      try {
        await this.client.json("DELETE", this.path(""), undefined, opts.signal ?? AbortSignal.timeout(30_000));
      } catch (err) {
        if (!(err instanceof WithRuntimeError && "status" in err && err.status === 410)) throw err;
      } finally {
        this.#killing = undefined;
      }
      this.#killed = true;
    })();
    return this.#killing;
  }

  /** The same as kill(), like Go's Close. */
  close(): Promise<void> {
    return this.kill();
  }

  /** Destroys the sandbox when an `await using` block ends. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.kill();
  }

  /**
   * Runs a command and returns its collected result: a shell command line
   * (bash -c), an argv (no shell), or a whole ExecRequest. A command that
   * fails is a result, not an error: check exitCode. It throws only when the
   * command could not run: BadRequestError (such as a cwd that does not
   * exist), LeaseEndedError, SandboxStoppedError, a transport error, or the
   * signal.
   */
  async exec(cmd: Command, opts: CallOptions = {}): Promise<ExecResult> {
    const req = toRequest(cmd);
    return this.client.json<ExecResult>("POST", this.path("/exec"), req, opts.signal, runWait(req.timeoutSeconds, EXEC_DEFAULT));
  }

  /** Runs a shell command line with default settings: exec({ command }). */
  run(command: string, opts: CallOptions = {}): Promise<ExecResult> {
    return this.exec({ command }, opts);
  }

  /**
   * Runs a command and yields its events as they happen: "start", then
   * "stdout" and "stderr" chunks, then one "exit" event whose result holds
   * the exit code (its stdout and stderr are empty: the output went out as
   * events). Output is not capped, and the server waits for the reader.
   *
   * Throws (from the loop) when the command could not run or the stream
   * broke: an "error" event becomes its APIError; a sandbox whose lease
   * ended during the command, LeaseEndedError. Leaving the loop early
   * closes the stream, and the server kills the command.
   *
   * ```ts
   * for await (const ev of sbx.execStream("make test")) {
   *   if (ev.type === "stdout") process.stdout.write(eventData(ev));
   *   if (ev.type === "exit") console.log("exit code", ev.result!.exitCode);
   * }
   * ```
   */
  async *execStream(cmd: Command, opts: CallOptions = {}): AsyncGenerator<ExecEvent, void, undefined> {
    const resp = await this.client.request("POST", this.path("/exec"), {
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
          let ev: ExecEvent;
          try {
            ev = JSON.parse(line) as ExecEvent;
          } catch (err) {
            throw new WithRuntimeError(`withruntime: bad event in exec stream: ${(err as Error).message}`, { cause: err });
          }
          if (ev.type === "exit") {
            if (!ev.result) throw new WithRuntimeError("withruntime: exit event without a result");
            yield ev;
            return;
          }
          if (ev.type === "error") {
            const e = ev.error ?? { code: "internal", message: "exec failed without a message" };
            throw apiError(statusOfCode(e.code), e.code, e.message);
          }
          if ((ev.type as string) === HEARTBEAT) continue; // the server's sign of life on a quiet stream
          yield ev;
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
      info = await this.refresh();
    } catch {
      // unknown: below
    }
    if (info?.state === "stopped") throw stoppedError(info);
    const why = broke instanceof Error ? `: ${broke.message}` : "";
    throw new WithRuntimeError(`withruntime: exec stream ended without an exit event${why} (the sandbox may have been stopped)`, {
      cause: broke,
    });
  }

  /**
   * Runs a command, copying its output byte for byte to stdout and stderr
   * (either may be left out to discard it) as it arrives, and returns the
   * result once it exits. Throws as exec does, and if a write throws.
   */
  async execTo(cmd: Command, opts: ExecToOptions = {}): Promise<ExecResult> {
    const sink = (s: ExecToOptions["stdout"]) =>
      s === undefined ? undefined : typeof s === "function" ? s : (b: Uint8Array) => void s.write(b);
    const out = sink(opts.stdout);
    const err = sink(opts.stderr);
    const callOpts: CallOptions = opts.signal ? { signal: opts.signal } : {};
    for await (const ev of this.execStream(cmd, callOpts)) {
      if (ev.type === "stdout") out?.(eventData(ev));
      else if (ev.type === "stderr") err?.(eventData(ev));
      else if (ev.type === "exit") return ev.result!;
    }
    throw new WithRuntimeError("withruntime: exec stream ended without an exit event");
  }

  /**
   * Runs a cell of Python in a context (a Jupyter kernel that keeps its
   * variables between calls) and returns its Execution: `text` (the cell's
   * value), `results` (rich outputs: charts as `png`, DataFrames as
   * `html`...), `logs` and `error`. The sandbox must be of the
   * "code-interpreter" template (others throw UnsupportedError). An
   * exception in the code is not thrown: it is `error`. The handlers, when
   * given, are called as output arrives.
   *
   * ```ts
   * const ex = await sbx.runCode("import pandas as pd; pd.DataFrame({'a': [1, 2]}).a.sum()");
   * ex.text; // "3"
   * const chart = await sbx.runCode("import matplotlib.pyplot as plt; plt.plot([1, 2, 3]);");
   * chart.results[0].pngBytes();
   * ```
   */
  runCode(code: string, opts: RunCodeOptions = {}): Promise<Execution> {
    return this.code.run(code, opts);
  }

  /** Starts a new context (its own kernel and variables); pass it to runCode({ context }). */
  createCodeContext(opts: CreateContextOptions = {}): Promise<CodeContext> {
    return this.code.createContext(opts);
  }

  /** The sandbox's contexts, oldest first. */
  listCodeContexts(opts: CallOptions = {}): Promise<CodeContext[]> {
    return this.code.listContexts(opts.signal);
  }

  /** Gives the context a new kernel; its variables are lost. */
  restartCodeContext(context: CodeContext | string, opts: CallOptions = {}): Promise<CodeContext> {
    return this.code.restartContext(context, opts.signal);
  }

  /** Stops the context's kernel and forgets the context. */
  removeCodeContext(context: CodeContext | string, opts: CallOptions = {}): Promise<void> {
    return this.code.removeContext(context, opts.signal);
  }

  private get code(): CodeInterpreter {
    return new CodeInterpreter(this.client, this.path(""));
  }

  /** The sandbox's API path plus suffix. */
  private path(suffix: string): string {
    return `/v1/sandboxes/${encodeURIComponent(this.id)}${suffix}`;
  }
}

/** The 410 error for a sandbox found stopped, as the server would answer it. */
function stoppedError(info: SandboxInfo) {
  const code = info.endReason === "lease_ended" ? "lease_ended" : "sandbox_stopped";
  const msg =
    info.endReason === "lease_ended"
      ? `sandbox ${info.id}'s lease ended at ${info.leaseEndsAt} and it was stopped; create a new sandbox (or extend leases with setTimeout before they end)`
      : `sandbox ${info.id} is stopped (${info.endReason ?? "unknown reason"}); create a new sandbox`;
  return apiError(410, code, msg);
}
