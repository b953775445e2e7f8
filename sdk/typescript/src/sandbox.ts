// The two handles a user holds: a Sandbox (one sandbox: commands, files,
// code, its lease and network) and a Client (one server: sandboxes,
// secrets, keys, usage, templates). They refer to each other
// (client.create() gives a Sandbox, sbx.client is its Client), so they
// share this module; what they do is in the feature modules below them
// (exec, files, code, templates, account), each a set of calls over the
// HTTP core (http.ts). Nothing below imports this module.
import * as account from "./account.js";
import type { CreateKeyOptions, UsageQuery } from "./account.js";
import {
  CodeInterpreter,
  type CodeContext,
  type CreateContextOptions,
  type Execution,
  type RunCodeOptions,
} from "./code.js";
import { apiError, type APIError, ConflictError, statusOfCode, WithRuntimeError } from "./errors.js";
import * as exec from "./exec.js";
import { EXEC_DEFAULT, stoppedError, toRequest, type Command, type ExecToOptions } from "./exec.js";
import { Files } from "./files.js";
import { HttpClient, type CallOptions, type ClientOptions } from "./http.js";
import * as snapshots from "./snapshots.js";
import type { ForkOptions, SnapshotListOptions, SnapshotOptions } from "./snapshots.js";
import * as templates from "./templates.js";
import * as vols from "./volumes.js";
import { VolumeFiles } from "./volumes.js";
import { Pty } from "./terminal.js";
import type {
  BuildTemplateOptions,
  CreateSandboxRequest,
  ExecEvent,
  ExecResult,
  KeyInfo,
  NetworkPolicy,
  SandboxInfo,
  SandboxWithResult,
  Schemas,
  SecretInfo,
  SnapshotInfo,
  Template,
  TemplateOptions,
  TemplateTarball,
  UploadTemplateOptions,
  SandboxMetric,
  SandboxMetrics,
  UsageReport,
  UsageRow,
  VolumeInfo,
  VolumeMount,
} from "./types.js";
import { BOOT_WAIT, CHECKPOINT_WAIT, runWait } from "./wait.js";

// Node 20 has Symbol.asyncDispose; older runtimes get a stand-in so that
// `await using` compiled by TypeScript finds the same symbol we define.
(Symbol as { asyncDispose?: symbol }).asyncDispose ??= Symbol("Symbol.asyncDispose");

/** Which server to use: a Client, or the options to make one (default: from the environment or the config file). */
export interface ConnectionOptions extends ClientOptions {
  /** The client to use; baseURL, apiKey and fetch are then ignored. */
  client?: Client;
}

/** Options of Sandbox.pause. */
export interface PauseOptions extends CallOptions {
  /**
   * What the pause saves: "full" (default: memory, processes and files; the
   * resume continues where it was) or "filesystem" (the root filesystem's
   * files alone; its processes end, its memory is freed, and the resume
   * boots it fresh with those files).
   */
  mode?: Schemas["PauseRequest"]["mode"];
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
  onLeaseEnd?: CreateSandboxRequest["onLeaseEnd"];
  /**
   * What a lease-end pause saves: "full" (default: memory, processes,
   * files) or "filesystem" (the root filesystem's files alone; the resume
   * boots it fresh).
   */
  pauseMode?: CreateSandboxRequest["pauseMode"];
  /** Whether any request while paused resumes the sandbox first (default: true when onLeaseEnd is "pause"). */
  autoResume?: boolean;
  /**
   * The key's volumes (Client.createVolume) to mount, each at its absolute
   * path, read-write unless readOnly (writes inside then fail with EROFS);
   * at most 8, at paths apart from each other, not / and not in /proc,
   * /sys, /dev, /run, /tmp or /etc, each a directory the template has (in
   * the base template /data, /mnt or /srv: a sandbox never adds one to its
   * template). Their files outlive the sandbox; several sandboxes may mount
   * one volume at once. A sandbox with volumes starts cold (never from the
   * warm pool). A volume that is not the key's is a NotFoundError.
   */
  volumes?: VolumeMount[];
  /**
   * Start from this snapshot (its id, or its name among the key's
   * snapshots; see Sandbox.snapshot) instead of booting the template: its
   * processes run on where the snapshot was taken, with their memory and
   * files. template and diskMiB are then the snapshot's (leave them out),
   * memoryMiB at least its memory (default: the same) and cpu by default its
   * source's. env is added to the environment of commands started
   * afterwards; programs already running keep theirs. A snapshot not found
   * (or another key's) is a NotFoundError.
   */
  snapshot?: string;
}

/** Selects sandboxes for Sandbox.list. Absent fields match everything. */
export interface ListFilter extends ConnectionOptions, CallOptions {
  state?: SandboxInfo["state"];
  /** Sandboxes that have every one of these labels. */
  metadata?: Record<string, string>;
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
  if (opts.pauseMode !== undefined) req.pauseMode = opts.pauseMode;
  if (opts.autoResume !== undefined) req.autoResume = opts.autoResume;
  if (opts.volumes !== undefined && opts.volumes.length > 0) req.volumes = opts.volumes;
  if (opts.snapshot !== undefined && opts.snapshot !== "") req.snapshot = opts.snapshot;
  return req;
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
  /**
   * The sandbox's terminals, shaped after E2B's `sbx.pty`:
   *
   * ```ts
   * const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => process.stdout.write(d) });
   * await term.sendInput("stty size\n"); // prints "24 80"
   * await term.resize({ cols: 120, rows: 40 });
   * await term.sendInput("exit 3\n");
   * (await term.wait()).exitCode; // 3
   * ```
   */
  readonly pty: Pty;
  #info: SandboxInfo;
  #killed = false;
  #killing: Promise<void> | undefined;

  /** Use Sandbox.create or Sandbox.connect. */
  constructor(client: Client, info: SandboxInfo) {
    this.client = client;
    this.id = info.id;
    this.#info = info;
    this.files = new Files(client, this.path(""));
    this.pty = new Pty(client, this.path(""));
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
    const out = await c.json<Schemas["SandboxList"]>("GET", "/v1/sandboxes" + (qs ? "?" + qs : ""), undefined, filter.signal);
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
   *
   * `mode: "filesystem"` saves only the files of its root filesystem (not
   * /tmp, /dev/shm or volumes): its processes end and its memory is freed
   * at once, and the resume boots it fresh with the same id and those
   * files; no process of before runs (`imageMode` is "filesystem" while it
   * is paused). It throws ConflictError when the files' archive would pass
   * the sandbox's disk size (a sparse file; it runs on).
   */
  async pause(opts: PauseOptions = {}): Promise<SandboxInfo> {
    const body: Schemas["PauseRequest"] = opts.mode ? { mode: opts.mode } : {};
    this.#info = await this.client.json<SandboxInfo>("POST", this.path("/pause"), body, opts.signal, CHECKPOINT_WAIT);
    return this.#info;
  }

  /**
   * Boots the paused sandbox where it was, with a lease of timeoutSeconds
   * (default: the lease it was last given). Throws ConflictError (not
   * paused), UnavailableError, SpendingLimitError (it stays paused),
   * SandboxStoppedError (it could not be resumed and was destroyed).
   */
  async resume(timeoutSeconds?: number, opts: CallOptions = {}): Promise<SandboxInfo> {
    const body: Schemas["ResumeRequest"] = timeoutSeconds ? { timeoutSeconds } : {};
    this.#info = await this.client.json<SandboxInfo>("POST", this.path("/resume"), body, opts.signal, CHECKPOINT_WAIT);
    return this.#info;
  }

  /**
   * Moves the end of the sandbox's lease to `seconds` from now (at least 1;
   * the server sets a maximum) and returns the updated record. Throws
   * BadRequestError, LeaseEndedError, SandboxStoppedError.
   */
  async setTimeout(seconds: number, opts: CallOptions = {}): Promise<SandboxInfo> {
    const body: Schemas["SetTimeoutRequest"] = { timeoutSeconds: seconds };
    this.#info = await this.client.json<SandboxInfo>("POST", this.path("/timeout"), body, opts.signal);
    return this.#info;
  }

  /**
   * The sandbox's recent resource use, oldest first: a sample per meter
   * interval (5 s by default) of the last hour at most, measured on the
   * host, and one taken now when the last is older; only those from `from`
   * to `to` when given (a Date, or RFC 3339 / YYYY-MM-DD). Empty for a
   * stopped sandbox. The history lives in the server's memory: a restart
   * begins it again. Throws NotFoundError, BadRequestError (a bad window).
   */
  async metrics(query: { from?: Date | string; to?: Date | string } & CallOptions = {}): Promise<SandboxMetric[]> {
    const q = new URLSearchParams();
    for (const name of ["from", "to"] as const) {
      const v = query[name];
      if (v !== undefined && v !== "") q.set(name, typeof v === "string" ? v : v.toISOString());
    }
    const qs = q.toString();
    const out = await this.client.json<SandboxMetrics>("GET", this.path("/metrics") + (qs ? "?" + qs : ""), undefined, query.signal);
    return out.metrics;
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
   * Saves the running sandbox as a new snapshot and resolves to it, ready;
   * the sandbox runs on after a brief pause (some hundreds of
   * milliseconds). Commands running at that moment end with ConflictError
   * (their connections close; the command is killed); background processes
   * run on. Throws ConflictError (the key has a snapshot of that name; the
   * sandbox holds what cannot be saved, such as volumes), SandboxPausedError
   * (resume it first), NoSpaceError (the image would not fit the key's disk
   * quota or the host: nothing was written), UnsupportedError (a driver
   * without snapshots), BadRequestError, LeaseEndedError, SandboxStoppedError.
   */
  snapshot(opts: SnapshotOptions = {}): Promise<SnapshotInfo> {
    return snapshots.takeSnapshot(this.client, this.path(""), opts);
  }

  /** The snapshots taken of this sandbox that the key sees, newest first. */
  snapshots(opts: CallOptions = {}): Promise<SnapshotInfo[]> {
    return snapshots.listSnapshots(this.client, { ...opts, sourceSandboxId: this.id });
  }

  /**
   * Snapshots the running sandbox (which runs on after a brief pause) and
   * makes `count` sandboxes (1 to 32) from that snapshot, each with the
   * source's processes, memory and files and a life of its own: its own id,
   * lease, network namespace and secrets. A sandbox that could not be made
   * is an error in the ForkResult, not a rejection; kill the others when
   * done (ForkResult.killAll). Throws (nothing was made) BadRequestError (a
   * bad count or option), and what snapshot throws.
   *
   * ```ts
   * const forks = await sbx.fork(3, { timeoutSeconds: 300 });
   * for (const f of forks.made) await f.exec("echo each its own");
   * await forks.killAll();
   * ```
   */
  async fork(count = 1, opts: ForkOptions = {}): Promise<ForkResult> {
    const ans = await snapshots.fork(this.client, this.path(""), count, opts);
    if (!Array.isArray(ans?.sandboxes)) throw new WithRuntimeError("withruntime: the fork's answer has no sandboxes");
    const made: (Sandbox | undefined)[] = [];
    const errors: (APIError | undefined)[] = [];
    for (const f of ans.sandboxes as Schemas["ForkedSandbox"][]) {
      if (f.sandbox?.id) {
        made.push(new Sandbox(this.client, f.sandbox));
        errors.push(undefined);
        continue;
      }
      const code = f.error?.code || "internal";
      made.push(undefined);
      errors.push(apiError(statusOfCode(code), code, f.error?.message || "the server said nothing of this sandbox"));
    }
    return new ForkResult(ans.snapshot, ans.snapshotKept, made, errors);
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
  exec(cmd: Command, opts: CallOptions = {}): Promise<ExecResult> {
    return exec.exec(this.client, this.path(""), cmd, opts);
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
  execStream(cmd: Command, opts: CallOptions = {}): AsyncGenerator<ExecEvent, void, undefined> {
    return exec.execStream(this.client, this.path(""), cmd, opts, () => this.refresh());
  }

  /**
   * Runs a command, copying its output byte for byte to stdout and stderr
   * (either may be left out to discard it) as it arrives, and returns the
   * result once it exits. Throws as exec does, and if a write throws.
   */
  execTo(cmd: Command, opts: ExecToOptions = {}): Promise<ExecResult> {
    return exec.execTo(this.execStream(cmd, opts.signal ? { signal: opts.signal } : {}), opts);
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

/**
 * What Sandbox.fork made: `sandboxes[i]` is the i-th new sandbox, or
 * undefined when `errors[i]` (an APIError) says why it could not be made;
 * each is made or fails on its own. The new sandboxes are yours to kill
 * (killAll, or each one's kill).
 */
export class ForkResult {
  constructor(
    /** The snapshot they were made from (deleted unless snapshotKept). */
    readonly snapshot: SnapshotInfo,
    /** Whether the snapshot is kept (ForkOptions.keepSnapshot). */
    readonly snapshotKept: boolean,
    readonly sandboxes: (Sandbox | undefined)[],
    readonly errors: (APIError | undefined)[],
  ) {}

  /** The sandboxes that were made, in order. */
  get made(): Sandbox[] {
    return this.sandboxes.filter((s): s is Sandbox => s !== undefined);
  }

  /** Throws the first error when any sandbox could not be made (the others stay made). */
  throwIfErrors(): void {
    const e = this.errors.find((x) => x !== undefined);
    if (e) throw e;
  }

  /** Kills every sandbox that was made. */
  async killAll(): Promise<void> {
    await Promise.all(this.made.map((s) => s.kill()));
  }
}

/**
 * A client of one Runtime server: its sandboxes, secrets, API keys, usage
 * and templates. Sandbox.create, Sandbox.connect and Sandbox.list make one
 * with no options unless given one.
 *
 * The server is found, in this order, in the options (baseURL, apiKey), the
 * environment (WITHRUNTIME_URL and WITHRUNTIME_API_KEY), or the CLI's config
 * file (~/.config/withruntime/config.json, {"url", "apiKey"}). With none of
 * these the constructor throws a NotConfiguredError that says how to
 * configure one: the SDK never starts a server itself. request and json
 * (from HttpClient) reach routes without a method here.
 */
export class Client extends HttpClient {
  /** Creates a sandbox on this server (see Sandbox.create). */
  create(opts: Omit<SandboxOptions, keyof ConnectionOptions> = {}): Promise<Sandbox> {
    return Sandbox.create({ ...opts, client: this });
  }

  /** A handle on a running sandbox of this server (see Sandbox.connect). */
  connect(id: string, opts: CallOptions = {}): Promise<Sandbox> {
    return Sandbox.connect(id, { ...opts, client: this });
  }

  /** Lists this server's sandboxes (see Sandbox.list). */
  list(filter: Omit<ListFilter, keyof ConnectionOptions> = {}): Promise<SandboxInfo[]> {
    return Sandbox.list({ ...filter, client: this });
  }

  /**
   * Stores (or replaces) a write-only secret and returns its description,
   * without the value. A sandbox created with `secrets: [name]` sees `name`
   * as an environment variable holding a placeholder (`wr_placeholder_...`);
   * the egress proxy replaces the placeholder with `value` in the headers of
   * HTTPS requests to `hosts` (host names or `*.wildcards`, not IP
   * addresses), and nowhere else. Sandboxes created afterwards get a
   * replaced value; running ones keep theirs. `name` is letters, digits and
   * `_`, not starting with a digit; `value` at most 8 KiB, without line
   * breaks. Throws BadRequestError (whose message never contains the
   * value), UnauthorizedError.
   */
  setSecret(name: string, value: string, hosts: string[], opts: CallOptions = {}): Promise<SecretInfo> {
    return account.setSecret(this, name, value, hosts, opts.signal);
  }

  /** The stored secrets by name, with their hosts and times; values are never returned. Throws UnauthorizedError. */
  listSecrets(opts: CallOptions = {}): Promise<SecretInfo[]> {
    return account.listSecrets(this, opts.signal);
  }

  /**
   * Deletes a stored secret: new sandboxes can no longer name it; running
   * ones created with it keep using it until the server restarts. Throws
   * NotFoundError (no such secret).
   */
  deleteSecret(name: string, opts: CallOptions = {}): Promise<void> {
    return account.deleteSecret(this, name, opts.signal);
  }

  /**
   * Creates an API key labelled `name` (1 to 100 characters) and returns it
   * with its `secret` (`wr_...`), which is shown this once: store it, and
   * pass it as `apiKey`. `dailyLimitMicros` caps what the key's sandboxes may
   * cost per UTC day, in micro-dollars; once reached, its running sandboxes
   * are stopped and its creates throw SpendingLimitError until midnight UTC.
   * `diskQuotaMiB`, `pausedQuota` and `sandboxesQuota` are its quotas (the
   * server's defaults where absent, for a key with a daily limit).
   * Throws BadRequestError (an empty or too long name, a negative limit or
   * quota), UnauthorizedError.
   */
  createKey(name: string, opts: CreateKeyOptions = {}): Promise<KeyInfo & { secret: string }> {
    return account.createKey(this, name, opts);
  }

  /** Every API key of the server, revoked ones included, oldest first, without their secrets. Throws UnauthorizedError. */
  listKeys(opts: CallOptions = {}): Promise<KeyInfo[]> {
    return account.listKeys(this, opts.signal);
  }

  /**
   * Revokes the live key `id` (`key_...`, its id, not its secret) at once:
   * requests with it then throw UnauthorizedError. Sandboxes it created keep
   * running. Throws NotFoundError (no such live key), ConflictError (the key
   * this client authenticates with).
   */
  revokeKey(id: string, opts: CallOptions = {}): Promise<void> {
    return account.revokeKey(this, id, opts.signal);
  }

  /**
   * Metered usage and cost per UTC day, sandbox or key: one UsageRow per
   * group with usage in the window, sorted by group, with CPU-seconds,
   * GiB-seconds and micro-dollars (see UsageRow for where the figures come
   * from); empty if nothing ran. usageReport also gives the total and the
   * prices. Throws BadRequestError (an unknown groupBy, from not before to).
   */
  async usage(query: UsageQuery = {}): Promise<UsageRow[]> {
    return (await this.usageReport(query)).rows;
  }

  /** The whole usage report (see usage): the window the server used, its prices, the rows and their total. */
  usageReport(query: UsageQuery = {}): Promise<UsageReport> {
    return account.usageReport(this, query);
  }

  /** The key's snapshots (an administrator's key: every key's), newest first; sourceSandboxId keeps those of one sandbox. Throws UnauthorizedError. */
  snapshots(opts: SnapshotListOptions = {}): Promise<SnapshotInfo[]> {
    return snapshots.listSnapshots(this, opts);
  }

  /** The snapshot `ref`: its id (snap_...) or its name among the key's snapshots. Throws NotFoundError (none, or another key's). */
  getSnapshot(ref: string, opts: CallOptions = {}): Promise<SnapshotInfo> {
    return snapshots.getSnapshot(this, ref, opts.signal);
  }

  /**
   * Deletes the snapshot `ref` (id or name) and its image; the sandboxes
   * made from it run on. Throws NotFoundError (none, or another key's),
   * ConflictError (it is still being taken).
   */
  deleteSnapshot(ref: string, opts: CallOptions = {}): Promise<void> {
    return snapshots.deleteSnapshot(this, ref, opts.signal);
  }

  /**
   * Makes the key's empty volume `name` (1 to 63 letters, digits, '.', '_',
   * '-', starting with a letter or digit) of `sizeMiB` MiB (at least 16),
   * a hard quota on its files, and resolves to it, ready to mount
   * (`Sandbox.create({ volumes: [{ name, path: "/data" }] })`). Throws
   * BadRequestError (a bad name or size), ConflictError (the key has a
   * volume of that name), NoSpaceError (the key's disk quota or the host's
   * disk; the message says which), UnsupportedError (the server's driver
   * keeps no volumes: Kubernetes).
   */
  createVolume(name: string, sizeMiB: number, opts: CallOptions = {}): Promise<VolumeInfo> {
    return vols.createVolume(this, name, sizeMiB, opts.signal);
  }

  /** The key's volumes by name, with the bytes their files take and the sandboxes that mount them (every key sees only its own). */
  volumes(opts: CallOptions = {}): Promise<VolumeInfo[]> {
    return vols.listVolumes(this, opts.signal);
  }

  /** The key's volume `name`. Throws NotFoundError (none, or another key's). */
  getVolume(name: string, opts: CallOptions = {}): Promise<VolumeInfo> {
    return vols.getVolume(this, name, opts.signal);
  }

  /** Deletes the key's volume `name` and its files, for good. Throws ConflictError while a sandbox that is not stopped (a paused one too) mounts it, naming them; NotFoundError. */
  deleteVolume(name: string, opts: CallOptions = {}): Promise<void> {
    return vols.deleteVolume(this, name, opts.signal);
  }

  /** The files of the key's volume `name`, without a sandbox (see VolumeFiles); nothing is asked of the server until a call. */
  volumeFiles(name: string): VolumeFiles {
    return new VolumeFiles(this, name);
  }

  /** The server's templates by name. Throws UnauthorizedError. */
  listTemplates(opts: CallOptions = {}): Promise<Template[]> {
    return templates.listTemplates(this, opts.signal);
  }

  /** The template `name`. Throws NotFoundError, BadRequestError (an invalid name). */
  getTemplate(name: string, opts: CallOptions = {}): Promise<Template> {
    return templates.getTemplate(this, name, opts.signal);
  }

  /**
   * Deletes the template `name` and its files (admin keys). Throws
   * NotFoundError, ConflictError (sandboxes that are starting or running use
   * it, or the warm pool serves it; the message names them), ForbiddenError.
   */
  deleteTemplate(name: string, opts: CallOptions = {}): Promise<void> {
    return templates.deleteTemplate(this, name, opts.signal);
  }

  /**
   * Makes the new template `name` (1-63 of a-z, 0-9, `.`, `_`, `-`, starting
   * with a letter or digit) from a linux/amd64 container image (admin keys)
   * and resolves to it once it is ready. `image` is, as for `withruntime
   * template build --from-image`:
   *
   * - a registry image, `[HOST[:PORT]/]REPO[:TAG|@sha256:DIGEST]`, pulled by
   *   the server with the registry credentials of the user it runs as;
   * - `oci-layout:DIR`, or a directory path starting with `/`, `./` or
   *   `../`: an OCI image layout on this machine, which the SDK reads and
   *   uploads as a `docker save` tarball;
   * - `docker-archive:FILE`, or a file path starting with `/`, `./` or `../`
   *   or ending in `.tar`: a `docker save` tarball on this machine, uploaded
   *   as it is.
   *
   * `onEvent` gets each step event as the server pulls (or receives) and
   * flattens the layers. The template's sandboxes run commands as `user`
   * (uid 1000) in /workspace, with bash (or /bin/sh when the image has
   * none), and start with the image's environment. Throws ConflictError (the
   * name is taken), BadRequestError (an invalid name or reference, a wrong
   * architecture, a malformed image or layer, a path escape, a device node),
   * NotFoundError (no such image, or the registry refused access; no such
   * local file), TooLargeError (over the server's size cap), ForbiddenError.
   * A failed or aborted build leaves nothing behind.
   */
  createTemplate(name: string, image: string, opts: TemplateOptions = {}): Promise<Template> {
    return templates.createTemplate(this, name, image, opts);
  }

  /**
   * Makes the new template `name` from a `docker save` tarball (bytes, a
   * Blob, or a stream, uploaded as it is read); `opts.label` is recorded as
   * its origin (default "upload"). See createTemplate.
   */
  uploadTemplate(name: string, tarball: TemplateTarball, opts: UploadTemplateOptions = {}): Promise<Template> {
    return templates.uploadTemplate(this, name, tarball, opts);
  }

  /**
   * Builds the new template `name` from a Dockerfile (admin keys), as
   * `withruntime template build NAME -f Dockerfile CONTEXT` does. The build
   * context directory `context` is sent less what its .dockerignore excludes
   * (Docker's syntax): regular files, directories and symlinks, with their
   * modes and without owners. The Dockerfile is `opts.dockerfile` (a path on
   * this machine, default CONTEXT/Dockerfile; it may lie outside the context)
   * or the text `opts.dockerfileContent`. It may use FROM (a template of the
   * server, or a registry image), RUN, ENV, WORKDIR, USER, COPY and ADD
   * (files of the context) and ARG (values from `opts.buildArgs`); anything
   * else is refused by name before anything runs. The steps run in a sandbox
   * on the server with no network, unless `opts.internet` or `opts.allow`
   * (hosts or CIDRs, such as a package index) say otherwise.
   *
   * `onEvent` gets each step event (each layer and instruction) and each
   * output event (what RUN prints) as they happen. A failing RUN throws
   * BadRequestError with its exit code and last output; the other errors are
   * createTemplate's.
   */
  buildTemplate(name: string, context = ".", opts: BuildTemplateOptions = {}): Promise<Template> {
    return templates.buildTemplate(this, name, context, opts);
  }
}
