// The code interpreter: notebook-style contexts (Jupyter kernels) in
// sandboxes of the "code-interpreter" template, which keep variables from
// one runCode to the next and return charts as images. The wire types are
// aliases of api/openapi.yaml's schemas; Execution and Result are classes
// written here, over them, for their accessors (text, pngBytes, formats).
import type { HttpClient } from "./http.js";
import type { Schema, Schemas } from "./types.js";
import { WithRuntimeError } from "./errors.js";
import { KERNEL_WAIT, runWait } from "./wait.js";

/** The template whose sandboxes run code in contexts. */
export const CODE_INTERPRETER_TEMPLATE = "code-interpreter";
/** The timeout of a runCode that sets none, in seconds. */
export const DEFAULT_CODE_TIMEOUT_SECONDS = 300;

/** A context: one kernel and the variables it keeps (state "starting", "idle", "busy" or "dead"; restarts: kernels lost). (Schema `CodeContext`.) */
export interface CodeContext extends Schema<"CodeContext"> {}

/** An exception the code raised, or why the call failed (TimeoutError, OutOfMemoryError, KernelDied); traceback in plain text. (Schema `ExecutionError`.) */
export interface ExecutionError extends Schema<"ExecutionError"> {}

/** What a cell printed, chunk by chunk. (Schema `ExecutionLogs`.) */
export interface Logs extends Schema<"ExecutionLogs"> {}

/** A chunk of output as onStdout and onStderr get it. */
export interface OutputMessage {
  line: string;
  /** True for stderr. */
  error: boolean;
}

/** The wire form of a Result: a MIME bundle. (Schema `ExecutionResult`.) */
export interface ResultData extends Schema<"ExecutionResult"> {}

/** What a matplotlib figure plots (schema `Chart`): type, title, axes, and its elements' values. */
export interface Chart extends Schema<"Chart"> {}

/** One thing a chart plots (schema `ChartElement`): a series of points, a bar, a wedge or a box. */
export interface ChartElement extends Schema<"ChartElement"> {}

/** The MIME type of a pandas DataFrame's columns in a result's data: `{column: [values...]}`. */
export const DATAFRAME_MIME = "application/vnd.withruntime.dataframe+json";

/**
 * One rich output, a MIME bundle: the cell's value (isMainResult) or
 * something it displayed (a chart, a DataFrame). Each format the kernel sent
 * is a property: text, html, markdown, svg, latex, javascript are strings;
 * png, jpeg, pdf base64 strings (see pngBytes); json the value. `data` holds
 * every MIME type as sent.
 */
export class Result {
  readonly data: Record<string, unknown>;
  readonly metadata: Record<string, unknown>;
  readonly isMainResult: boolean;
  /**
   * What the matplotlib figure this result shows plots (its type, title,
   * axes and values), read from the figure; undefined for anything else.
   */
  readonly chart?: Chart;

  constructor(r: ResultData) {
    this.data = r.data ?? {};
    this.metadata = r.metadata ?? {};
    this.isMainResult = !!r.isMainResult;
    if (r.chart) this.chart = r.chart;
  }

  private str(mime: string): string | undefined {
    const v = this.data[mime];
    return typeof v === "string" ? v : undefined;
  }

  get text(): string | undefined {
    return this.str("text/plain");
  }
  get html(): string | undefined {
    return this.str("text/html");
  }
  get markdown(): string | undefined {
    return this.str("text/markdown");
  }
  get svg(): string | undefined {
    return this.str("image/svg+xml");
  }
  get png(): string | undefined {
    return this.str("image/png");
  }
  get jpeg(): string | undefined {
    return this.str("image/jpeg");
  }
  get pdf(): string | undefined {
    return this.str("application/pdf");
  }
  get latex(): string | undefined {
    return this.str("text/latex");
  }
  get javascript(): string | undefined {
    return this.str("application/javascript");
  }
  get json(): unknown {
    return this.data["application/json"];
  }

  /** The PNG image, decoded (undefined if there is none). */
  pngBytes(): Uint8Array | undefined {
    const s = this.png;
    return s === undefined ? undefined : Uint8Array.from(atob(s.replace(/\s/g, "")), (c) => c.charCodeAt(0));
  }

  /** The result's MIME types. */
  formats(): string[] {
    return Object.keys(this.data);
  }

  /** A pandas DataFrame's columns, `{column: [values...]}`, or undefined. */
  get dataframe(): Record<string, unknown[]> | undefined {
    const v = this.data[DATAFRAME_MIME];
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown[]>) : undefined;
  }

  toJSON(): ResultData {
    return { data: this.data, metadata: this.metadata, isMainResult: this.isMainResult, ...(this.chart ? { chart: this.chart } : {}) };
  }
}

/** The wire form of an Execution. (Schema `Execution`.) */
export interface ExecutionData extends Schema<"Execution"> {}

/**
 * What runCode produced: `text` is the cell's value as text, `results` every
 * rich output in order, `logs` stdout and stderr, `error` the exception (an
 * exception in the code is not thrown: it is here).
 */
export class Execution {
  contextId = "";
  results: Result[] = [];
  logs: Logs = { stdout: [], stderr: [] };
  error?: ExecutionError;
  executionCount = 0;
  /** The timeout interrupted the code (the context keeps its variables unless stateLost). */
  timedOut = false;
  /** The kernel was killed because the sandbox ran out of memory. */
  outOfMemory = false;
  /** The kernel was lost during this call: the context's variables are gone. */
  stateLost = false;
  /** This call ran in a new kernel because the previous one was lost (see notice). */
  restarted = false;
  /** A plain sentence about a lost or restarted kernel ("" otherwise). */
  notice = "";
  logsTruncated = false;
  resultsTruncated = false;
  durationMs = 0;

  /** The main result's text/plain (the cell's value), or undefined. */
  get text(): string | undefined {
    return this.results.find((r) => r.isMainResult)?.text;
  }

  static fromJSON(d: ExecutionData): Execution {
    const ex = new Execution();
    ex.update(d);
    ex.results = (d.results ?? []).map((r) => new Result(r));
    ex.logs = { stdout: d.logs?.stdout ?? [], stderr: d.logs?.stderr ?? [] };
    return ex;
  }

  /** Takes the summary fields of an Execution (an end event's). */
  update(d: Partial<ExecutionData>): void {
    if (d.error) this.error = d.error;
    this.contextId = d.contextId || this.contextId;
    this.executionCount = d.executionCount ?? 0;
    this.timedOut = !!d.timedOut;
    this.outOfMemory = !!d.outOfMemory;
    this.stateLost = !!d.stateLost;
    this.restarted = !!d.restarted;
    this.notice = d.notice ?? "";
    this.logsTruncated = !!d.logsTruncated;
    this.resultsTruncated = !!d.resultsTruncated;
    this.durationMs = d.durationMs ?? 0;
  }
}

/** runCode's options. Handlers, when given, are called as output arrives (the answer is then streamed). */
export interface RunCodeOptions {
  /** The context (or its id); default, the sandbox's default context. */
  context?: CodeContext | string;
  /** "python" (default), "javascript" ("js"), "typescript" ("ts"), "r", "bash" or "java"; without a context, the cell runs in that language's default context. A language without a kernel is a BadRequestError. */
  language?: string;
  /** Interrupts the code after this many seconds, keeping the context (default 300). */
  timeoutSeconds?: number;
  /** Set in the kernel's environment for this call only. */
  env?: Record<string, string>;
  onStdout?: (msg: OutputMessage) => unknown;
  onStderr?: (msg: OutputMessage) => unknown;
  onResult?: (result: Result) => unknown;
  onError?: (error: ExecutionError) => unknown;
  /** Aborting interrupts the code. */
  signal?: AbortSignal;
}

/** createCodeContext's options. */
export interface CreateContextOptions {
  /** The kernel's language: "python" (default), "javascript" ("js"), "typescript" ("ts"), "r", "bash" or "java". */
  language?: string;
  /** The kernel's working directory (default /workspace). */
  cwd?: string;
  env?: Record<string, string>;
  /** Who the kernel runs as: "user" (the default, uid 1000) or "root"; the cwd must be a directory that user can enter. */
  user?: string;
  signal?: AbortSignal;
}

/** One line of a streamed runCode. (Schema `CodeEvent`.) */
type CodeEvent = Schemas["CodeEvent"];

function contextId(c: CodeContext | string | undefined): string | undefined {
  if (c === undefined || c === "") return undefined;
  return typeof c === "string" ? c : c.id;
}

/** The code interpreter's calls for one sandbox (used by Sandbox). */
export class CodeInterpreter {
  constructor(
    private readonly client: HttpClient,
    private readonly base: string,
  ) {}

  async run(code: string, opts: RunCodeOptions = {}): Promise<Execution> {
    if (typeof code !== "string") throw new TypeError("code must be a string");
    const body: Schemas["RunCodeRequest"] = { code };
    const cid = contextId(opts.context);
    if (cid) body.contextId = cid;
    if (opts.language) body.language = opts.language;
    if (opts.timeoutSeconds !== undefined) body.timeoutSeconds = opts.timeoutSeconds;
    if (opts.env && Object.keys(opts.env).length > 0) body.env = opts.env;
    const streamed = !!(opts.onStdout || opts.onStderr || opts.onResult || opts.onError);
    if (!streamed) {
      const wait = KERNEL_WAIT + runWait(opts.timeoutSeconds, DEFAULT_CODE_TIMEOUT_SECONDS);
      return Execution.fromJSON(await this.client.json<ExecutionData>("POST", this.base + "/code", body, opts.signal, wait));
    }
    const resp = await this.client.request("POST", this.base + "/code", {
      body: JSON.stringify(body),
      contentType: "application/json",
      accept: "application/x-ndjson",
      signal: opts.signal,
      waitSeconds: KERNEL_WAIT, // its answer begins once a kernel runs
    });
    if (!resp.body) throw new WithRuntimeError("withruntime: code stream had no body");
    const ex = new Execution();
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    try {
      for (;;) {
        const chunk = await reader.read();
        if (chunk.done) break;
        buf += dec.decode(chunk.value, { stream: true });
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line.trim() === "") continue;
          let ev: CodeEvent;
          try {
            ev = JSON.parse(line) as CodeEvent;
          } catch (err) {
            throw new WithRuntimeError(`withruntime: bad event in code stream: ${(err as Error).message}`, { cause: err });
          }
          if (await this.apply(ex, ev, opts)) return ex;
        }
      }
    } finally {
      reader.cancel().catch(() => {});
    }
    throw new WithRuntimeError("withruntime: code stream ended without an end event (the sandbox may have been stopped)");
  }

  /** Applies one event; true at the end. */
  private async apply(ex: Execution, ev: CodeEvent, opts: RunCodeOptions): Promise<boolean> {
    switch (ev.type) {
      case "start":
        ex.contextId = ev.contextId ?? "";
        break;
      case "stdout":
      case "stderr": {
        const text = ev.text ?? "";
        const err = ev.type === "stderr";
        (err ? ex.logs.stderr : ex.logs.stdout).push(text);
        await (err ? opts.onStderr : opts.onStdout)?.({ line: text, error: err });
        break;
      }
      case "result":
        if (ev.result) {
          const r = new Result(ev.result);
          ex.results.push(r);
          await opts.onResult?.(r);
        }
        break;
      case "error":
        if (ev.error) {
          ex.error = ev.error;
          await opts.onError?.(ev.error);
        }
        break;
      case "end": {
        if (!ev.execution) throw new WithRuntimeError("withruntime: end event without an execution");
        const err = ex.error;
        ex.update(ev.execution);
        ex.error = ex.error ?? err;
        return true;
      }
    }
    return false;
  }

  async createContext(opts: CreateContextOptions = {}): Promise<CodeContext> {
    const body: Schemas["CreateContextRequest"] = {};
    if (opts.language) body.language = opts.language;
    if (opts.cwd) body.cwd = opts.cwd;
    if (opts.env && Object.keys(opts.env).length > 0) body.env = opts.env;
    if (opts.user) body.user = opts.user;
    return this.client.json<CodeContext>("POST", this.base + "/contexts", body, opts.signal, KERNEL_WAIT);
  }

  async listContexts(signal?: AbortSignal): Promise<CodeContext[]> {
    const out = await this.client.json<Schemas["ContextList"]>("GET", this.base + "/contexts", undefined, signal);
    return out.contexts;
  }

  async restartContext(context: CodeContext | string, signal?: AbortSignal): Promise<CodeContext> {
    const id = encodeURIComponent(contextId(context) ?? "");
    return this.client.json<CodeContext>("POST", `${this.base}/contexts/${id}/restart`, undefined, signal, KERNEL_WAIT);
  }

  async removeContext(context: CodeContext | string, signal?: AbortSignal): Promise<void> {
    const id = encodeURIComponent(contextId(context) ?? "");
    await this.client.json<void>("DELETE", `${this.base}/contexts/${id}`, undefined, signal);
  }
}
