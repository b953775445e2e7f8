// The HTTP core: how the SDK finds its server (options, the environment,
// the CLI's config file), sends a request with the API key and bounded
// waits, and turns an error answer into an APIError. Every feature module
// (files, code, templates, exec, account) makes its calls through an
// HttpClient; Client is one, with the feature methods on top. This module
// imports nothing of the SDK but errors.ts, wait.ts and types.ts.
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

import { APIError, NotConfiguredError, ServerTimeoutError, WithRuntimeError, apiError } from "./errors.js";
import type { Schemas } from "./types.js";
import { DEFAULT_IDLE_TIMEOUT_SECONDS, DEFAULT_RESPONSE_TIMEOUT_SECONDS, boundedFetch } from "./wait.js";

/** The environment variable naming the server's base URL, such as http://127.0.0.1:7780. */
export const ENV_URL = "WITHRUNTIME_URL";
/** The environment variable holding the API key (wr_...), sent as a bearer token. */
export const ENV_API_KEY = "WITHRUNTIME_API_KEY";
/** The CLI's config file, relative to the user's config directory (usually ~/.config): {"url": ..., "apiKey": ...}. */
export const CONFIG_FILE = "withruntime/config.json";

/** How to reach a server. Every field is optional; see Client. */
export interface ClientOptions {
  /** The server's base URL, overriding WITHRUNTIME_URL and the config file. */
  baseURL?: string;
  /** The API key, overriding WITHRUNTIME_API_KEY and the config file. */
  apiKey?: string;
  /** The fetch function to use (default: the global fetch). */
  fetch?: typeof fetch;
  /**
   * Seconds each call waits for the server's answer to begin (its headers),
   * beyond what the call runs on the server first: a collected exec its
   * timeoutSeconds (default 120), runCode its timeout plus a kernel's start,
   * create a sandbox's boot (2 min), pause and resume 10 min, a template
   * build's pull 2 min. A streamed upload that keeps moving restarts the
   * clock (a string, Blob or bytes body counts from the start). A bound that
   * runs out throws ServerTimeoutError. Default 60; 0: no bound.
   */
  responseTimeoutSeconds?: number;
  /**
   * Seconds a stream (execStream, a streamed runCode, a template build's
   * progress) or a download may go without a byte before it throws
   * ServerTimeoutError; time spent between reads does not count. The server
   * sends a heartbeat every 2 s on its streams, so 5 or more is safe.
   * Default 60; 0: no bound.
   */
  idleTimeoutSeconds?: number;
}

/** Options every call takes. */
export interface CallOptions {
  /** Aborts the call (and, for exec, kills the command). */
  signal?: AbortSignal;
}

/** Where the user's config directory is, as Go's os.UserConfigDir finds it (the CLI is written in Go). */
function userConfigDir(): string | undefined {
  const env = process.env;
  switch (process.platform) {
    case "win32":
      return env["AppData"] || undefined;
    case "darwin":
      return env["HOME"] ? join(env["HOME"], "Library", "Application Support") : undefined;
    default: {
      if (env["XDG_CONFIG_HOME"]) return env["XDG_CONFIG_HOME"];
      const home = env["HOME"] || homedir();
      return home ? join(home, ".config") : undefined;
    }
  }
}

/** The CLI's config file's path (~/.config/withruntime/config.json, as Go's os.UserConfigDir finds it), or undefined when there is no config directory. */
export function configFilePath(): string | undefined {
  const dir = userConfigDir();
  return dir ? join(dir, CONFIG_FILE) : undefined;
}

function resolveConfig(opts: ClientOptions): { baseURL: string; apiKey: string } {
  if (opts.baseURL) return { baseURL: opts.baseURL, apiKey: opts.apiKey ?? "" };
  const env = process.env;
  const envURL = env[ENV_URL];
  if (envURL) return { baseURL: envURL, apiKey: opts.apiKey || env[ENV_API_KEY] || "" };
  const dir = userConfigDir();
  const path = dir ? join(dir, CONFIG_FILE) : undefined;
  if (path) {
    let text: string | undefined;
    try {
      text = readFileSync(path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
        throw new WithRuntimeError(`withruntime: reading config file ${path}: ${(err as Error).message}`, { cause: err });
      }
    }
    if (text !== undefined) {
      let fc: unknown;
      try {
        fc = JSON.parse(text);
      } catch (err) {
        throw new WithRuntimeError(`withruntime: config file ${path} is not valid JSON: ${(err as Error).message}`, { cause: err });
      }
      const file = (fc ?? {}) as { url?: unknown; apiKey?: unknown };
      if (typeof file.url === "string" && file.url !== "") {
        const fileKey = typeof file.apiKey === "string" ? file.apiKey : "";
        return { baseURL: file.url, apiKey: opts.apiKey || env[ENV_API_KEY] || fileKey };
      }
    }
  }
  throw new NotConfiguredError(
    `withruntime: no Runtime server configured: set ${ENV_URL} (and ${ENV_API_KEY}) to a server's URL and key, ` +
      `write ${path ?? "~/.config/" + CONFIG_FILE} as {"url": ..., "apiKey": ...}, or pass { baseURL, apiKey }; ` +
      "to run a server on this host: `sudo withruntime serve --listen 127.0.0.1:7780`, then `sudo withruntime keys create NAME` for a key",
  );
}

const GLOBAL_DISPATCHER = Symbol.for("undici.globalDispatcher.1");
let patient: object | null | undefined;

/**
 * Node's fetch (undici) gives up on an answer whose headers take over 300
 * seconds, or whose body is silent that long: a command that runs for
 * minutes before it answers. This is a dispatcher of the same class as Node's
 * global one with those two timeouts off: the SDK bounds the waits itself
 * (wait.ts: the response timeout plus what the call runs, and the idle
 * timeout, which the server's heartbeats keep from firing). It is undefined
 * until Node's fetch has made its global dispatcher (at its first call; the
 * first request of a Sandbox, create or connect, is short), outside Node,
 * and when the application installed a dispatcher of its own (such as a
 * proxy agent), which is then left to do its job.
 */
function patientDispatcher(): object | undefined {
  if (patient !== undefined) return patient ?? undefined;
  const global = (globalThis as Record<symbol, unknown>)[GLOBAL_DISPATCHER] as { constructor?: unknown } | undefined;
  if (!global) return undefined;
  const Agent = global.constructor as (new (opts: object) => object) | undefined;
  if (typeof Agent !== "function" || Agent.name !== "Agent") {
    patient = null;
    return undefined;
  }
  try {
    patient = new Agent({ headersTimeout: 0, bodyTimeout: 0 });
  } catch {
    patient = null;
  }
  return patient ?? undefined;
}

/** A bound in seconds as given (undefined: def; 0: none). */
function seconds(v: number | undefined, def: number, name: string): number {
  if (v === undefined) return def;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
    throw new TypeError(`${name} must be a number of seconds (0 for no bound), not ${String(v)}`);
  }
  return v;
}

/** What HttpClient.request sends. */
export interface RequestOptions {
  body?: RequestInit["body"];
  contentType?: string;
  accept?: string;
  signal?: AbortSignal | undefined;
  /** More request headers, such as Range. */
  headers?: Record<string, string>;
  /** Seconds the call runs on the server before it answers, added to the response timeout (see ClientOptions.responseTimeoutSeconds). */
  waitSeconds?: number;
}

/**
 * The HTTP core of a client of one Runtime server: its address, its key and
 * its bounds, and the two calls every feature is made of (request, json).
 * Client extends it with the API's methods.
 *
 * The server is found, in this order, in the options (baseURL, apiKey), the
 * environment (WITHRUNTIME_URL and WITHRUNTIME_API_KEY), or the CLI's config
 * file (~/.config/withruntime/config.json, {"url", "apiKey"}). With none of
 * these the constructor throws a NotConfiguredError that says how to
 * configure one: the SDK never starts a server itself.
 */
export class HttpClient {
  /** The server's base URL, without a trailing slash. */
  readonly baseURL: string;
  readonly #apiKey: string;
  readonly #fetch: typeof fetch;
  readonly #globalFetch: boolean;
  readonly #responseTimeout: number;
  readonly #idleTimeout: number;

  constructor(opts: ClientOptions = {}) {
    const { baseURL, apiKey } = resolveConfig(opts);
    if (!baseURL.startsWith("http://") && !baseURL.startsWith("https://")) {
      throw new WithRuntimeError(`withruntime: server URL ${JSON.stringify(baseURL)} must start with http:// or https://`);
    }
    this.baseURL = baseURL.replace(/\/+$/, "");
    this.#apiKey = apiKey;
    this.#fetch = opts.fetch ?? globalThis.fetch;
    this.#globalFetch = opts.fetch === undefined;
    this.#responseTimeout = seconds(opts.responseTimeoutSeconds, DEFAULT_RESPONSE_TIMEOUT_SECONDS, "responseTimeoutSeconds");
    this.#idleTimeout = seconds(opts.idleTimeoutSeconds, DEFAULT_IDLE_TIMEOUT_SECONDS, "idleTimeoutSeconds");
  }

  /**
   * Performs one request to a path of the API (such as "/v1/templates"); an
   * error status becomes an APIError. The caller consumes (or cancels) the
   * answer's body. The Sandbox methods are built on it; use it for routes
   * they do not cover.
   */
  async request(method: string, path: string, init: RequestOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { ...init.headers };
    if (this.#apiKey) headers["Authorization"] = `Bearer ${this.#apiKey}`;
    if (init.accept) headers["Accept"] = init.accept;
    if (init.body != null && init.contentType) headers["Content-Type"] = init.contentType;
    const req: RequestInit & { duplex?: "half" } = { method, headers, body: init.body ?? null };
    const dispatcher = this.#globalFetch ? patientDispatcher() : undefined;
    if (dispatcher) Object.assign(req, { dispatcher }); // Node's fetch takes it; see patientDispatcher
    if (init.signal) req.signal = init.signal;
    if (init.body instanceof ReadableStream) {
      // A streamed upload. Following a redirect would need the body twice,
      // so fetch (undici) would tee it and keep every chunk sent until the
      // request ends; without window and redirects it streams in bounded
      // memory.
      req.duplex = "half";
      req.redirect = "error";
      req.window = null;
    }
    const bounds = { headers: this.#responseTimeout > 0 ? this.#responseTimeout + (init.waitSeconds ?? 0) : 0, idle: this.#idleTimeout };
    const describe = { server: this.baseURL, method, path: path.split("?")[0] ?? path };
    let resp: Response;
    try {
      resp = await boundedFetch(this.#fetch, this.baseURL + path, req, bounds, describe);
    } catch (err) {
      if (err instanceof ServerTimeoutError) throw err;
      if (init.signal?.aborted) throw init.signal.reason ?? err;
      const cause = (err as { cause?: { message?: string } }).cause;
      const detail = cause?.message ? `${(err as Error).message}: ${cause.message}` : (err as Error).message;
      throw new WithRuntimeError(`withruntime: cannot reach the Runtime server at ${this.baseURL}: ${detail}`, { cause: err });
    }
    if (resp.status >= 400) throw await decodeError(resp);
    return resp;
  }

  /**
   * Where a WebSocket to a path of the API goes: its URL (ws:// or wss://
   * for the server's http:// or https://), the headers of its handshake
   * (the API key as a bearer token) and the bound on the handshake in
   * seconds (the response timeout; 0: none). Terminals open theirs with it.
   */
  webSocketTarget(path: string): { url: string; headers: Record<string, string>; handshakeTimeoutSeconds: number } {
    const headers: Record<string, string> = { "User-Agent": "withruntime-typescript" };
    if (this.#apiKey) headers["Authorization"] = `Bearer ${this.#apiKey}`;
    const url = this.baseURL.replace(/^http/, "ws") + path;
    return { url, headers, handshakeTimeoutSeconds: this.#responseTimeout };
  }

  /**
   * Sends body (if not undefined) as JSON to a path of the API and returns
   * the decoded answer (undefined for an empty one). waitSeconds is what
   * the call runs on the server before it answers (RequestOptions).
   */
  async json<T>(method: string, path: string, body?: unknown, signal?: AbortSignal, waitSeconds?: number): Promise<T> {
    const resp = await this.request(method, path, {
      body: body === undefined ? null : JSON.stringify(body),
      contentType: "application/json",
      accept: "application/json",
      signal,
      waitSeconds,
    });
    let text: string;
    try {
      text = await resp.text();
    } catch (err) {
      if (err instanceof ServerTimeoutError) throw err;
      throw new WithRuntimeError(`withruntime: reading the answer to ${method} ${path}: ${(err as Error).message}`, { cause: err });
    }
    if (text === "") return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new WithRuntimeError(`withruntime: decoding the answer to ${method} ${path}: ${(err as Error).message}`, { cause: err });
    }
  }
}

/** Turns an error answer into an APIError. */
async function decodeError(resp: Response): Promise<APIError> {
  let text = "";
  try {
    text = await resp.text();
  } catch {
    // the body broke off: the status still says what happened
  }
  return errorOfBody(resp.status, resp.statusText, text);
}

/** The APIError of an error answer's status and body (a WebSocket handshake's refusal too). */
export function errorOfBody(status: number, statusText: string, text: string): APIError {
  try {
    // The schemas' field names, each value unknown until checked: the body may be anything.
    const eb = JSON.parse(text) as { [K in keyof Schemas["Error"]]?: { [F in keyof Schemas["ErrorDetail"]]?: unknown } };
    if (eb && typeof eb.error?.code === "string" && eb.error.code !== "") {
      return apiError(status, eb.error.code, typeof eb.error.message === "string" ? eb.error.message : "");
    }
  } catch {
    // not JSON: below
  }
  const msg = text.trim().slice(0, 1 << 20) || statusText || `HTTP ${status}`;
  return apiError(status, `http_${status}`, msg);
}
