import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

import { APIError, NotConfiguredError, ServerTimeoutError, WithRuntimeError, apiError } from "./errors.js";
import { Sandbox, type ConnectionOptions, type ListFilter, type SandboxOptions } from "./sandbox.js";
import * as templates from "./templates.js";
import { DEFAULT_IDLE_TIMEOUT_SECONDS, DEFAULT_RESPONSE_TIMEOUT_SECONDS, boundedFetch } from "./wait.js";
import type {
  BuildTemplateOptions,
  GroupBy,
  KeyInfo,
  SandboxInfo,
  SecretInfo,
  Template,
  TemplateOptions,
  TemplateTarball,
  UploadTemplateOptions,
  UsageReport,
  UsageRow,
} from "./types.js";

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

/**
 * Selects a usage report (Client.usage). Absent fields take the server's
 * defaults: the last 30 days (from midnight UTC), grouped by day.
 */
export interface UsageQuery extends CallOptions {
  /**
   * Start of the window, exclusive: a Date, or a string the server parses
   * (RFC 3339, or YYYY-MM-DD for that UTC day's midnight). Default 30 days
   * before `to`, at midnight UTC.
   */
  from?: Date | string;
  /**
   * End of the window, inclusive: a Date, or an RFC 3339 string, or
   * YYYY-MM-DD (through the end of that UTC day). Default now.
   */
  to?: Date | string;
  /** "day" (the default), "sandbox" or "key". */
  groupBy?: GroupBy;
}

/** Options of Client.createKey. */
export interface CreateKeyOptions extends CallOptions {
  /**
   * Cap on what the key's sandboxes may cost per UTC day, in micro-dollars
   * (1 USD = 1,000,000); absent or 0: no limit.
   */
  dailyLimitMicros?: number;
  /**
   * Cap, in MiB, on the host disk the key's sandboxes hold (running and
   * paused sandboxes' diskMiB plus pause images); absent or 0: the server's
   * default for a key with a daily limit, none for an administrator's key.
   */
  diskQuotaMiB?: number;
  /** Cap on how many of the key's sandboxes may be paused at once; absent or 0: as diskQuotaMiB. */
  pausedQuota?: number;
  /** Cap on how many sandboxes the key may hold at once, starting, running and paused together; absent or 0: as diskQuotaMiB. */
  sandboxesQuota?: number;
}

/** A bound in seconds as given (undefined: def; 0: none). */
function seconds(v: number | undefined, def: number, name: string): number {
  if (v === undefined) return def;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
    throw new TypeError(`${name} must be a number of seconds (0 for no bound), not ${String(v)}`);
  }
  return v;
}

function when(v: Date | string): string {
  return v instanceof Date ? v.toISOString() : v;
}

/** What Client.request sends. */
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
 * A client of one Runtime server. Sandbox.create, Sandbox.connect and
 * Sandbox.list make one with no options unless given one.
 *
 * The server is found, in this order, in the options (baseURL, apiKey), the
 * environment (WITHRUNTIME_URL and WITHRUNTIME_API_KEY), or the CLI's config
 * file (~/.config/withruntime/config.json, {"url", "apiKey"}). With none of
 * these the constructor throws a NotConfiguredError that says how to
 * configure one: the SDK never starts a server itself.
 */
export class Client {
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
    return this.json<SecretInfo>("POST", "/v1/secrets", { name, value, hosts }, opts.signal);
  }

  /** The stored secrets by name, with their hosts and times; values are never returned. Throws UnauthorizedError. */
  async listSecrets(opts: CallOptions = {}): Promise<SecretInfo[]> {
    const out = await this.json<{ secrets: SecretInfo[] }>("GET", "/v1/secrets", undefined, opts.signal);
    return out.secrets;
  }

  /**
   * Deletes a stored secret: new sandboxes can no longer name it; running
   * ones created with it keep using it until the server restarts. Throws
   * NotFoundError (no such secret).
   */
  async deleteSecret(name: string, opts: CallOptions = {}): Promise<void> {
    await this.json<void>("DELETE", `/v1/secrets/${encodeURIComponent(name)}`, undefined, opts.signal);
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
    const body: {
      name: string;
      dailyLimitMicros?: number;
      diskQuotaMiB?: number;
      pausedQuota?: number;
      sandboxesQuota?: number;
    } = { name };
    if (opts.dailyLimitMicros) body.dailyLimitMicros = opts.dailyLimitMicros;
    if (opts.diskQuotaMiB) body.diskQuotaMiB = opts.diskQuotaMiB;
    if (opts.pausedQuota) body.pausedQuota = opts.pausedQuota;
    if (opts.sandboxesQuota) body.sandboxesQuota = opts.sandboxesQuota;
    return this.json<KeyInfo & { secret: string }>("POST", "/v1/keys", body, opts.signal);
  }

  /** Every API key of the server, revoked ones included, oldest first, without their secrets. Throws UnauthorizedError. */
  async listKeys(opts: CallOptions = {}): Promise<KeyInfo[]> {
    const out = await this.json<{ keys: KeyInfo[] }>("GET", "/v1/keys", undefined, opts.signal);
    return out.keys;
  }

  /**
   * Revokes the live key `id` (`key_...`, its id, not its secret) at once:
   * requests with it then throw UnauthorizedError. Sandboxes it created keep
   * running. Throws NotFoundError (no such live key), ConflictError (the key
   * this client authenticates with).
   */
  async revokeKey(id: string, opts: CallOptions = {}): Promise<void> {
    await this.json<void>("DELETE", `/v1/keys/${encodeURIComponent(id)}`, undefined, opts.signal);
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
    const q = new URLSearchParams();
    if (query.from !== undefined && query.from !== "") q.set("from", when(query.from));
    if (query.to !== undefined && query.to !== "") q.set("to", when(query.to));
    if (query.groupBy) q.set("groupBy", query.groupBy);
    const qs = q.toString();
    return this.json<UsageReport>("GET", "/v1/usage" + (qs ? "?" + qs : ""), undefined, query.signal);
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
  try {
    const eb = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (eb && typeof eb.error?.code === "string" && eb.error.code !== "") {
      return apiError(resp.status, eb.error.code, typeof eb.error.message === "string" ? eb.error.message : "");
    }
  } catch {
    // not JSON: below
  }
  const msg = text.trim().slice(0, 1 << 20) || resp.statusText || `HTTP ${resp.status}`;
  return apiError(resp.status, `http_${resp.status}`, msg);
}
