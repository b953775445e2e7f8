// File watches (Files.watch): GET .../files/watch, an NDJSON stream of the
// changes inotify inside the sandbox reports, read as a FileWatch (an async
// iterator of WatchEvents) once its first line says the watch is in place.
import { apiError, ServerTimeoutError, statusOfCode, WithRuntimeError } from "./errors.js";
import type { CallOptions, HttpClient } from "./http.js";
import type { Schemas, WatchEvent } from "./types.js";

/** How many events the server holds for a watch whose client reads slower than the sandbox changes files; past it they are dropped and an "overflow" event says how many. */
export const WATCH_QUEUE_EVENTS = 4096;
/** How many directories one recursive watch follows; past it the watch ends with a BadRequestError. */
export const WATCH_MAX_DIRS = 8192;
/** The longest line a watch's stream may send (an event is far smaller): a longer one is an error, not memory held. */
const MAX_LINE = 1 << 20;

/** Options of Files.watch. */
export interface WatchOptions extends CallOptions {
  /** Watch every directory under the path too (default false); a directory created under it is watched once its create is read, and what it already holds then is reported as created. */
  recursive?: boolean;
}

/**
 * A watch of a directory in a sandbox, in place (see Files.watch): `for
 * await (const ev of w)` yields each change as a WatchEvent, in the order
 * the sandbox's kernel saw them, until the watch is stopped or ends.
 *
 * Stop it with close(), `await using`, or the options' signal; leaving a
 * `for await` loop (break, return, a throw) closes it too, as it does any
 * async iterator's. After close the iteration ends (done); after the signal
 * aborts it throws the signal's reason (as Node's fs.promises.watch does).
 *
 * The iteration throws NotFoundError when the watched directory is removed
 * or moved (the watch ends), BadRequestError when a recursive watch would
 * follow more than WATCH_MAX_DIRS directories, WithRuntimeError when the
 * stream ends because the sandbox was stopped or paused, ServerTimeoutError
 * when the server goes silent (it sends a heartbeat every 2 s).
 */
export class FileWatch implements AsyncIterableIterator<WatchEvent>, AsyncDisposable {
  /** The watched directory, absolute inside the sandbox. */
  path = "";
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #signal: AbortSignal | undefined;
  readonly #dec = new TextDecoder();
  #buf = "";
  #closed = false;

  /**
   * Resolves once the watch is in place (its first line, "ready", was
   * read); Files.watch awaits it. Rejects as the iteration would.
   */
  readonly ready: Promise<void>;

  /** Use Files.watch. */
  constructor(body: ReadableStream<Uint8Array>, signal?: AbortSignal) {
    this.#reader = body.getReader();
    this.#signal = signal;
    this.ready = this.#start();
    this.ready.catch(() => {}); // awaited by Files.watch; never an unhandled rejection
  }

  /** Whether the watch was stopped or has ended. */
  get closed(): boolean {
    return this.#closed;
  }

  async #start(): Promise<void> {
    const first = await this.#event();
    if (first === undefined) throw new WithRuntimeError("withruntime: the watch was closed before it was in place");
    if (first.type !== "ready") {
      throw await this.#fail(new WithRuntimeError(`withruntime: the watch began with a ${JSON.stringify(first.type)} event, not ready`));
    }
    this.path = first.path ?? "";
  }

  /** The next line, or undefined once the watch is closed. */
  async #line(): Promise<string | undefined> {
    for (;;) {
      if (this.#closed) return undefined;
      const nl = this.#buf.indexOf("\n");
      if (nl >= 0) {
        const line = this.#buf.slice(0, nl);
        this.#buf = this.#buf.slice(nl + 1);
        return line;
      }
      if (this.#buf.length > MAX_LINE) throw await this.#fail(new WithRuntimeError(`withruntime: a line of the watch stream is over ${MAX_LINE} bytes`));
      let chunk: Awaited<ReturnType<ReadableStreamDefaultReader<Uint8Array>["read"]>>;
      try {
        chunk = await this.#reader.read();
      } catch (err) {
        if (this.#closed) return undefined;
        if (this.#signal?.aborted) throw await this.#fail(this.#signal.reason ?? err);
        if (err instanceof ServerTimeoutError) throw await this.#fail(err);
        throw await this.#fail(new WithRuntimeError(`withruntime: the watch stream broke: ${(err as Error).message}`, { cause: err }));
      }
      if (chunk.done) {
        if (this.#closed) return undefined;
        throw await this.#fail(new WithRuntimeError("withruntime: the watch stream ended (the sandbox may have been stopped or paused)"));
      }
      this.#buf += this.#dec.decode(chunk.value, { stream: true });
    }
  }

  /** The next event that is not a heartbeat ("ready" too), or undefined once closed. */
  async #event(): Promise<Schemas["WatchEvent"] | undefined> {
    for (;;) {
      const line = await this.#line();
      if (line === undefined) return undefined;
      if (line.trim() === "") continue;
      let ev: Schemas["WatchEvent"];
      try {
        ev = JSON.parse(line) as Schemas["WatchEvent"];
      } catch (err) {
        throw await this.#fail(new WithRuntimeError(`withruntime: bad event in watch stream: ${(err as Error).message}`, { cause: err }));
      }
      if (typeof ev !== "object" || ev === null || typeof ev.type !== "string") {
        throw await this.#fail(new WithRuntimeError("withruntime: bad event in watch stream: not an event object"));
      }
      if (ev.type === "heartbeat") continue;
      if (ev.type === "error") {
        const code = ev.code || "internal";
        throw await this.#fail(apiError(statusOfCode(code), code, ev.message || "the watch ended without a message"));
      }
      return ev;
    }
  }

  /** Closes the watch and gives err back, to throw. */
  async #fail(err: unknown): Promise<unknown> {
    await this.close();
    return err;
  }

  async next(): Promise<IteratorResult<WatchEvent, undefined>> {
    await this.ready;
    const ev = await this.#event();
    if (ev === undefined) return { done: true, value: undefined };
    const { code: _code, message: _message, ...rest } = ev;
    return { done: false, value: rest as WatchEvent }; // not ready, heartbeat or error: handled above
  }

  /** Called when a for await loop is left early: closes the watch. */
  async return(): Promise<IteratorResult<WatchEvent, undefined>> {
    await this.close();
    return { done: true, value: undefined };
  }

  [Symbol.asyncIterator](): FileWatch {
    return this;
  }

  /** Stops the watch (the server stops watching); a read under way then ends. Safe to call more than once. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#reader.cancel().catch(() => {});
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** Starts a watch of path in the sandbox at base (its API path) and resolves once it is in place (Files.watch). */
export async function watch(c: HttpClient, base: string, path: string, opts: WatchOptions): Promise<FileWatch> {
  const q = new URLSearchParams({ path });
  if (opts.recursive) q.set("recursive", "true");
  const resp = await c.request("GET", `${base}/files/watch?${q.toString()}`, { accept: "application/x-ndjson", signal: opts.signal });
  if (!resp.body) throw new WithRuntimeError("withruntime: the watch's answer had no body");
  const w = new FileWatch(resp.body, opts.signal);
  await w.ready;
  return w;
}
