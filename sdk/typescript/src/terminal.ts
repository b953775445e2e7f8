// Terminals: a program on a pseudo-terminal inside a sandbox (a shell, a
// REPL, vim, tmux), shaped after E2B's `sbx.pty`: create with a size and
// onData, sendInput, resize, kill, wait, and connect again.
//
// The program is a background process started with `pty` (POST
// /v1/sandboxes/{id}/processes); its I/O is the WebSocket GET
// .../processes/{pid}/terminal (api/openapi.yaml): output as binary
// messages, byte for byte as the program wrote it (a UTF-8 character may be
// split between two onData calls), input as binary messages, resize and
// signal as JSON text messages, the exit at the end. A connection first gets
// the recent output (the last 1 MiB), then live output; one that falls
// 1 MiB behind misses the oldest (`dropped`): the program never waits.
//
// The WebSocket client is the `ws` package: the SDK supports Node 20, whose
// global WebSocket is behind --experimental-websocket (stable from Node 22),
// and a browser-style WebSocket cannot send the Authorization header anyway.
import WebSocket from "ws";

import { TerminalDisconnectedError, WithRuntimeError, NotFoundError } from "./errors.js";
import { errorOfBody, type CallOptions, type HttpClient } from "./http.js";
import type { ProcessInfo, PtySize, Schemas, TerminalControl, TerminalEvent } from "./types.js";

/** The widest terminal a request may ask for (columns). */
export const MAX_PTY_COLS = 1000;
/** The tallest terminal a request may ask for (rows). */
export const MAX_PTY_ROWS = 1000;
/** The most one WebSocket message may carry (64 KiB); sendInput cuts longer input into messages of this size. */
export const MAX_TERMINAL_MESSAGE_BYTES = 64 << 10;
/** How much recent output a terminal keeps for a connection that comes later, and how far a slow connection may fall behind before it misses output (1 MiB). */
export const TERMINAL_REPLAY_BYTES = 1 << 20;
/** How many connections one terminal takes at once; one more is a RateLimitedError. */
export const MAX_TERMINAL_VIEWERS = 16;
/** The TERM a terminal's program gets unless its env or the sandbox's sets one. */
export const DEFAULT_TERM = "xterm-256color";

/** What a terminal runs when given no command: a login shell (bash, or sh where there is no bash). */
const LOGIN_SHELL = "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi";

/**
 * The output callback: each chunk of output in order, as bytes. While a
 * promise it returns is pending no more output is read (and a terminal that
 * falls 1 MiB behind loses its oldest output: `dropped`).
 */
export type OnData = (data: Uint8Array) => void | Promise<void>;

/** Options of `sbx.pty.create`. */
export interface TerminalOptions extends CallOptions {
  /** The terminal's width (default 80) and height (default 24), each 1 to 1000. */
  cols?: number;
  rows?: number;
  /** Gets the output. Without it the output is read and dropped. */
  onData?: OnData;
  /** A shell command line (bash -c) or an argv (run without a shell). Default: a login shell (bash -l). */
  command?: string | string[];
  /** The working directory (default /workspace). */
  cwd?: string;
  /** Environment variables added for the program (TERM is xterm-256color unless set here). */
  env?: Record<string, string>;
  /** "user" (default, uid 1000) or "root". */
  user?: string;
  /** Kill the program after this many seconds (it then exits 124); default none: the sandbox's lease ends it. */
  timeoutSeconds?: number;
}

/** Options of `sbx.pty.connect`. */
export interface ConnectTerminalOptions extends CallOptions {
  /** Gets the output: the recent output first (the last 1 MiB), then live output. */
  onData?: OnData;
}

/** How a terminal's program ended. */
export interface TerminalExit {
  /** Its exit status: 128+N when signal N ended it (130 after Ctrl-C), 124 when its timeout did, 137 when it was killed at the sandbox's memory or process limit. */
  exitCode: number;
  /** The signal that ended it ("SIGKILL", ...), if any. */
  signal?: string;
  timedOut?: boolean;
  oomKilled?: boolean;
  processLimitKilled?: boolean;
}

function checkSize(size: PtySize): PtySize {
  const ok = (n: number, max: number) => Number.isInteger(n) && n >= 1 && n <= max;
  if (!ok(size.cols, MAX_PTY_COLS) || !ok(size.rows, MAX_PTY_ROWS)) {
    throw new RangeError(`a terminal is 1 to ${MAX_PTY_COLS} columns by 1 to ${MAX_PTY_ROWS} rows, not cols ${size.cols}, rows ${size.rows}`);
  }
  return { cols: size.cols, rows: size.rows };
}

function bytesOf(data: Uint8Array | string): Uint8Array {
  return typeof data === "string" ? new TextEncoder().encode(data) : data;
}

/**
 * The terminals of one sandbox (`sbx.pty`), shaped after E2B's: create,
 * connect, and by pid sendInput, resize, kill and list.
 */
export class Pty {
  readonly #c: HttpClient;
  readonly #base: string;

  /** Use `sbx.pty`. */
  constructor(client: HttpClient, base: string) {
    this.#c = client;
    this.#base = base;
  }

  /**
   * Starts a program on a new terminal and connects to it. The program
   * leads a session of its own with the terminal as its controlling tty.
   * Throws RangeError (a size out of range), BadRequestError (a cwd that
   * does not exist, an argv program not in PATH), LeaseEndedError,
   * SandboxStoppedError, SandboxPausedError, WithRuntimeError (the server
   * could not be reached).
   */
  async create(opts: TerminalOptions = {}): Promise<Terminal> {
    const size = checkSize({ cols: opts.cols ?? 80, rows: opts.rows ?? 24 });
    const cmd = opts.command ?? LOGIN_SHELL;
    const req: Schemas["ExecRequest"] = typeof cmd === "string" ? { command: cmd } : { argv: cmd };
    req.pty = size;
    if (opts.cwd) req.cwd = opts.cwd;
    if (opts.env) req.env = opts.env;
    if (opts.user) req.user = opts.user;
    if (opts.timeoutSeconds) req.timeoutSeconds = opts.timeoutSeconds;
    const proc = await this.#c.json<ProcessInfo>("POST", `${this.#base}/processes`, req, opts.signal);
    try {
      const t = await this.connect(proc.pid, opts);
      t.process = proc;
      return t;
    } catch (err) {
      // Nothing left behind: the program would run with nobody on it.
      await this.#c.json("POST", this.#path(proc.pid, "/kill"), {}).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Connects to the terminal of process pid (made by create, the CLI's
   * `sandbox shell` or the API with `pty`). Several connections may be
   * open at once (up to 16), and each may send input. Throws NotFoundError
   * (no such process), ConflictError (a process without a terminal),
   * RateLimitedError (too many connections), the sandbox's state errors,
   * WithRuntimeError (the server could not be reached).
   */
  async connect(pid: number, opts: ConnectTerminalOptions = {}): Promise<Terminal> {
    const target = this.#c.webSocketTarget(this.#path(pid, "/terminal"));
    const ws = new WebSocket(target.url, {
      headers: target.headers,
      perMessageDeflate: false,
      maxPayload: 2 * MAX_TERMINAL_MESSAGE_BYTES,
      handshakeTimeout: target.handshakeTimeoutSeconds > 0 ? target.handshakeTimeoutSeconds * 1000 : undefined,
    });
    const t = new Terminal(this, pid, ws, opts.onData);
    await new Promise<void>((resolve, reject) => {
      const abort = () => {
        ws.terminate();
        reject(opts.signal?.reason ?? new WithRuntimeError("withruntime: aborted"));
      };
      opts.signal?.addEventListener("abort", abort, { once: true });
      ws.once("open", () => {
        opts.signal?.removeEventListener("abort", abort);
        resolve();
      });
      ws.once("unexpected-response", (_req, res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          reject(errorOfBody(res.statusCode ?? 0, res.statusMessage ?? "", Buffer.concat(chunks).toString("utf8")));
          ws.terminate();
        });
        res.on("error", (e) => reject(e));
      });
      ws.once("error", (err) =>
        reject(new WithRuntimeError(`withruntime: cannot open the terminal of process ${pid} at ${target.url}: ${err.message}`, { cause: err })),
      );
    });
    return t;
  }

  /**
   * Writes data to the terminal of process pid as typed input (Ctrl-C is
   * "\x03", Ctrl-D "\x04"), without a connection: POST .../stdin, 1 MiB at
   * a time. Throws NotFoundError, ConflictError (the program has ended),
   * TimeoutError (it read nothing for 10 s).
   */
  async sendInput(pid: number, data: Uint8Array | string, opts: CallOptions = {}): Promise<void> {
    const b = bytesOf(data);
    for (let i = 0; i < b.length; i += 1 << 20) {
      const resp = await this.#c.request("POST", this.#path(pid, "/stdin"), {
        body: b.subarray(i, i + (1 << 20)),
        contentType: "application/octet-stream",
        signal: opts.signal,
      });
      await resp.body?.cancel();
    }
  }

  /**
   * Sets the size of the terminal of process pid; its program gets
   * SIGWINCH. Throws RangeError, NotFoundError, ConflictError (a process
   * without a terminal, or one that ended).
   */
  async resize(pid: number, size: PtySize, opts: CallOptions = {}): Promise<void> {
    await this.#c.json<ProcessInfo>("POST", this.#path(pid, "/resize"), checkSize(size), opts.signal);
  }

  /**
   * Kills everything the program started (SIGKILL). Resolves to true when
   * it was running, false when it had already ended or there is no such
   * process, as E2B's pty.kill.
   */
  async kill(pid: number, opts: CallOptions = {}): Promise<boolean> {
    try {
      const p = await this.#c.json<ProcessInfo>("GET", this.#path(pid, ""), undefined, opts.signal);
      if (!p.running) return false;
      const body: Schemas["KillRequest"] = { signal: "SIGKILL" };
      await this.#c.json<ProcessInfo>("POST", this.#path(pid, "/kill"), body, opts.signal);
      return true;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }

  /** The sandbox's background processes that run on a terminal (running and recently ended ones). */
  async list(opts: CallOptions = {}): Promise<ProcessInfo[]> {
    const out = await this.#c.json<Schemas["ProcessList"]>("GET", `${this.#base}/processes`, undefined, opts.signal);
    return out.processes.filter((p) => p.pty);
  }

  #path(pid: number, suffix: string): string {
    return `${this.#base}/processes/${Math.trunc(pid)}${suffix}`;
  }
}

/**
 * One connection to a program's terminal. Output goes to the onData given
 * at create or connect; sendInput, resize, signal and kill act on the
 * program; wait waits for it to end; disconnect leaves it running.
 */
export class Terminal {
  /** The program's process id in the sandbox. */
  readonly pid: number;
  /** The process record the create made (undefined for a connect). */
  process: ProcessInfo | undefined;
  readonly #pty: Pty;
  readonly #ws: WebSocket;
  readonly #done: Promise<void>;
  #exit: TerminalExit | undefined;
  #dropped = 0;
  #errors: string[] = [];
  #failure: Error | undefined;
  #onDataFailed = false;

  /** Use `sbx.pty.create` or `sbx.pty.connect`. */
  constructor(pty: Pty, pid: number, ws: WebSocket, onData: OnData | undefined) {
    this.pid = pid;
    this.#pty = pty;
    this.#ws = ws;
    this.#done = new Promise<void>((resolve) => ws.once("close", () => resolve()));
    ws.on("error", (err) => {
      this.#failure ??= err;
    });
    ws.on("message", (data: Buffer, isBinary: boolean) => {
      if (isBinary) {
        if (!onData || data.length === 0) return;
        let out: void | Promise<void>;
        try {
          out = onData(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
        } catch (err) {
          this.#fail(err);
          return;
        }
        if (out instanceof Promise) {
          ws.pause(); // no more output until the callback is done with this chunk
          out.then(
            () => ws.resume(),
            (err: unknown) => this.#fail(err),
          );
        }
        return;
      }
      let ev: TerminalEvent;
      try {
        ev = JSON.parse(data.toString("utf8")) as TerminalEvent;
      } catch {
        return; // not an event: skipped, as a type this SDK does not know
      }
      switch (ev.type) {
        case "exit": {
          const x: TerminalExit = { exitCode: ev.exitCode ?? -1 };
          if (ev.signal) x.signal = ev.signal;
          if (ev.timedOut) x.timedOut = true;
          if (ev.oomKilled) x.oomKilled = true;
          if (ev.processLimitKilled) x.processLimitKilled = true;
          this.#exit = x;
          break;
        }
        case "dropped":
          this.#dropped = ev.dropped ?? this.#dropped;
          break;
        case "error":
          this.#errors.push(ev.message ?? "");
          break;
      }
    });
  }

  /** onData threw: the connection ends with its error (wait throws it). */
  #fail(err: unknown): void {
    this.#failure = err instanceof Error ? err : new Error(String(err));
    this.#onDataFailed = true;
    this.#ws.terminate();
  }

  /** How many bytes of output this connection missed because it fell more than 1 MiB behind (onData too slow); the program never waits. */
  get dropped(): number {
    return this.#dropped;
  }

  /** The server's answers to control messages it could not accept, and why the connection ended early, oldest first. */
  get errors(): string[] {
    return [...this.#errors];
  }

  /** How the program ended, once this connection has seen it. */
  get exit(): TerminalExit | undefined {
    return this.#exit;
  }

  /**
   * Writes data to the terminal as typed input (Enter is "\r" or "\n",
   * Ctrl-C "\x03", Ctrl-D "\x04"; a string is sent as UTF-8). Throws
   * TerminalDisconnectedError when the connection has ended.
   */
  async sendInput(data: Uint8Array | string): Promise<void> {
    const b = bytesOf(data);
    for (let i = 0; i < b.length; i += MAX_TERMINAL_MESSAGE_BYTES) {
      await this.#send(b.subarray(i, i + MAX_TERMINAL_MESSAGE_BYTES), true);
    }
  }

  /** Sets the terminal's size; the program gets SIGWINCH. Throws RangeError, TerminalDisconnectedError. */
  async resize(size: PtySize): Promise<void> {
    const msg: TerminalControl = { type: "resize", ...checkSize(size) };
    await this.#send(JSON.stringify(msg), false);
  }

  /**
   * Sends a signal ("SIGTERM", "SIGINT", ...) to everything the program
   * started. To interrupt only its foreground job, as a person does, send
   * "\x03" as input instead. An unknown signal is answered in `errors`.
   */
  async signal(signal: string): Promise<void> {
    const msg: TerminalControl = { type: "signal", signal };
    await this.#send(JSON.stringify(msg), false);
  }

  /** Kills everything the program started (SIGKILL, through the processes API, so it works also when the connection has ended). Resolves to Pty.kill's answer. */
  kill(opts: CallOptions = {}): Promise<boolean> {
    return this.#pty.kill(this.pid, opts);
  }

  /**
   * Waits for the program to end and resolves to how. Rejects with
   * TerminalDisconnectedError when the connection ends first (the program
   * may still run: connect again), and with what onData threw if it did
   * (the connection then ended).
   */
  async wait(): Promise<TerminalExit> {
    await this.#done;
    if (this.#exit) return this.#exit;
    if (this.#onDataFailed && this.#failure) throw this.#failure;
    const why = this.#errors.join("; ") || this.#failure?.message || "closed";
    throw new TerminalDisconnectedError(
      `withruntime: the connection to the terminal of process ${this.pid} ended before its program (${why}); connect again with sbx.pty.connect(pid)`,
    );
  }

  /** Closes this connection; the program runs on (connect again with sbx.pty.connect(pid)). */
  async disconnect(): Promise<void> {
    if (this.#ws.readyState === WebSocket.OPEN || this.#ws.readyState === WebSocket.CONNECTING) this.#ws.close(1000);
    await this.#done;
  }

  #send(data: Uint8Array | string, binary: boolean): Promise<void> {
    if (this.#ws.readyState !== WebSocket.OPEN) {
      return Promise.reject(
        new TerminalDisconnectedError(`withruntime: the connection to the terminal of process ${this.pid} has ended; connect again with sbx.pty.connect(pid)`),
      );
    }
    return new Promise((resolve, reject) => {
      this.#ws.send(data, { binary }, (err) => {
        if (err) reject(new TerminalDisconnectedError(`withruntime: the connection to the terminal of process ${this.pid} broke: ${err.message}`, { cause: err }));
        else resolve();
      });
    });
  }
}
