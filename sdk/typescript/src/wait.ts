// Bounded waits. A server that accepted the connection and then stopped
// answering (stopped with SIGSTOP, a hung host) would otherwise hold a call
// forever: every request waits at most the client's response timeout for
// the answer's headers, plus what the call runs on the server first
// (RequestOptions.waitSeconds), and every read of a stream or download at
// most the idle timeout for a byte (the server sends a heartbeat line every
// 2 s on its streams, so 5 s or more is safe). A bound that runs out is a
// ServerTimeoutError. The Go SDK (wait.go) applies the same rules.

import { ServerTimeoutError } from "./errors.js";

/** Seconds a call waits for the answer's headers, beyond what it runs first. */
export const DEFAULT_RESPONSE_TIMEOUT_SECONDS = 60;
/** Seconds a stream or download may go without a byte. */
export const DEFAULT_IDLE_TIMEOUT_SECONDS = 60;

/**
 * What calls run on the server before they answer (seconds), added to the
 * response timeout: a sandbox's boot (the server bounds it at 2 min), a
 * pause or resume (10 min), a template build's pull, a kernel's start.
 */
export const BOOT_WAIT = 120;
export const CHECKPOINT_WAIT = 600;
export const BUILD_WAIT = 120;
export const KERNEL_WAIT = 60;

/** What a collected exec or code cell of timeoutSeconds runs (undefined or 0: def, the server's default). */
export function runWait(timeoutSeconds: number | undefined, def: number): number {
  return timeoutSeconds && timeoutSeconds > 0 ? timeoutSeconds : def;
}

/** The longest delay setTimeout takes (about 24.8 days); a longer bound is none. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** How one request waits (seconds; 0: no bound). */
export interface Bounds {
  headers: number;
  idle: number;
}

/**
 * Calls fetch with init (its signal combined with the bounds' own), bounding
 * the wait for the answer's headers (restarted by each chunk a streamed
 * upload gives) and each read of its body. describe names the request for
 * the error.
 */
export async function boundedFetch(
  doFetch: typeof fetch,
  url: string,
  init: RequestInit,
  b: Bounds,
  describe: { server: string; method: string; path: string },
): Promise<Response> {
  const headersMs = b.headers * 1000;
  const idleMs = b.idle * 1000;
  const useHeaders = headersMs > 0 && headersMs <= MAX_TIMER_MS;
  const useIdle = idleMs > 0 && idleMs <= MAX_TIMER_MS;
  if (!useHeaders && !useIdle) return doFetch(url, init);
  const ctrl = new AbortController();
  let timedOut: ServerTimeoutError | undefined;
  const fire = (idle: boolean) => {
    timedOut ??= new ServerTimeoutError(describe.server, describe.method, describe.path, idle ? b.idle : b.headers, idle);
    ctrl.abort(timedOut);
  };
  const outer = init.signal;
  const onOuter = () => ctrl.abort(outer?.reason);
  if (outer?.aborted) ctrl.abort(outer.reason);
  else outer?.addEventListener("abort", onOuter, { once: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  let headersDone = false;
  const arm = () => {
    if (!useHeaders || headersDone || timedOut) return;
    clearTimeout(timer);
    timer = setTimeout(() => fire(false), headersMs);
  };
  arm();
  const req: RequestInit = { ...init, signal: ctrl.signal };
  if (useHeaders && init.body instanceof ReadableStream) req.body = progress(init.body, () => clearTimeout(timer), arm);
  let resp: Response;
  try {
    resp = await doFetch(url, req);
  } catch (err) {
    clearTimeout(timer);
    outer?.removeEventListener("abort", onOuter);
    if (timedOut) throw timedOut;
    throw err;
  } finally {
    headersDone = true;
    clearTimeout(timer);
  }
  if (!useIdle || !resp.body) {
    outer?.removeEventListener("abort", onOuter);
    return resp;
  }
  const body = idleBody(resp.body, idleMs, () => fire(true), () => timedOut, () => outer?.removeEventListener("abort", onOuter));
  return new Response(body, { status: resp.status, statusText: resp.statusText, headers: resp.headers });
}

/**
 * src, calling onWait before each chunk is pulled from it (the clock stops:
 * a slow producer is not a silent server) and onChunk after (an upload
 * that moves).
 */
function progress(src: ReadableStream<Uint8Array>, onWait: () => void, onChunk: () => void): ReadableStream<Uint8Array> {
  const reader = src.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(c) {
        onWait();
        const { done, value } = await reader.read();
        onChunk();
        if (done) c.close();
        else c.enqueue(value);
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

/**
 * body, each read of which fails (onIdle aborts the request) when no chunk
 * comes within ms. Only reads the consumer asks for are timed: time it
 * spends between reads does not count.
 */
function idleBody(
  body: ReadableStream<Uint8Array>,
  ms: number,
  onIdle: () => void,
  timedOut: () => ServerTimeoutError | undefined,
  done: () => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(c) {
        const t = setTimeout(onIdle, ms);
        try {
          const { done: end, value } = await reader.read();
          if (end) {
            done();
            c.close();
          } else c.enqueue(value);
        } catch (err) {
          done();
          c.error(timedOut() ?? err);
        } finally {
          clearTimeout(t);
        }
      },
      cancel(reason) {
        done();
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}
