// The JSON bodies of Runtime's HTTP API under the names users know them by.
// Each wire type is a schema of api/openapi.yaml, generated into
// generated/openapi.ts by `npm run generate`: the document is the one
// source, so a field the server gains reaches these types (and their field
// docs) by regenerating, and a hand copy cannot drift. Field names are the
// wire names, so these objects are the server's answers as they are.
//
// Written by hand here: the constants, and the options of the template
// calls (what the SDK takes, not what travels). test/contract.test.ts holds
// the names to the schemas.
import type { components } from "./generated/openapi.js";

/** Every schema of api/openapi.yaml by its name there, such as `Schemas["Process"]`: the types below extend these. */
export type Schemas = components["schemas"];

/** The schema named K (`interface X extends Schemas["K"]` is not valid TypeScript; this is). */
export type Schema<K extends keyof Schemas> = Schemas[K];

/** Where relative paths and commands without a cwd start. */
export const WORKSPACE = "/workspace";
/** The exec timeout when an ExecRequest sets none, in seconds. */
export const DEFAULT_EXEC_TIMEOUT_SECONDS = 120;
/** The cap on each of stdout and stderr in a collected ExecResult (1 MiB), unless ExecRequest.maxOutputBytes says otherwise. Streams are not capped. */
export const DEFAULT_MAX_OUTPUT_BYTES = 1 << 20;
/** The largest maxOutputBytes a request may ask for (16 MiB). */
export const MAX_MAX_OUTPUT_BYTES = 16 << 20;
/** The exit code of a command killed by its timeout, as coreutils timeout(1) reports it. */
export const TIMEOUT_EXIT_CODE = 124;

// Each wire type is an interface that extends its schema and adds nothing,
// rather than an alias (`type X = Schemas["Y"]`), so that editors and
// compiler messages show its name: an alias of an indexed type is shown
// expanded, as an object literal of 16 fields.

/**
 * A sandbox's network policy, enforced on the host: `{ internet: false }`
 * (the default: nothing but loopback), `{ internet: true }` (every public
 * destination, minus `deny`), or `{ allow: [...] }` (only what it lists).
 * Private, loopback, link-local, CGNAT and metadata addresses are never
 * reached. The server checks a policy: an invalid one (such as `allow` with
 * `internet: true`) is a BadRequestError saying what is wrong. Answers
 * leave out empty lists. (Schema `NetworkPolicy`.)
 */
export interface NetworkPolicy extends Schema<"NetworkPolicy"> {}

/** The body of POST /v1/sandboxes. Every field is optional; zero values take the server's defaults. (Schema `CreateSandboxRequest`.) */
export interface CreateSandboxRequest extends Schema<"CreateSandboxRequest"> {}

/**
 * The answer to a create with a first command: the sandbox and how the
 * command ended. Exactly one of result and error is set (error: the
 * command could not run; the sandbox exists either way). (Schema `SandboxWithResult`.)
 */
export interface SandboxWithResult extends Schema<"SandboxWithResult"> {}

/** A sandbox's record as the server returns it; costs in micro-dollars, sizes in MiB, times RFC 3339 UTC. (Schema `Sandbox`.) */
export interface SandboxInfo extends Schema<"Sandbox"> {}

/** One command to run. Set exactly one of `command` and `argv`. (Schema `ExecRequest`.) */
export interface ExecRequest extends Schema<"ExecRequest"> {}

/** How a command ended and what it printed. A non-zero exitCode is a result, not an error. (Schema `ExecResult`.) */
export interface ExecResult extends Schema<"ExecResult"> {}

/** The error object of every error answer and error event: a stable `code` and a `message` saying what to fix. (Schema `ErrorDetail`.) */
export interface ErrorInfo extends Schema<"ErrorDetail"> {}

/** One event of an exec stream (Sandbox.execStream): start, stdout, stderr, exit or error. (Schema `Event`.) */
export interface ExecEvent extends Omit<Schema<"Event">, "type"> {
  /** What happened: "start", "stdout", "stderr", "exit" or "error". The server's heartbeat lines (its sign of life on a quiet stream) are skipped before they reach you, so their type is left out. */
  type: Exclude<Schemas["Event"]["type"], "heartbeat">;
}

/** One file or directory in a sandbox. (Schema `FileInfo`.) */
export interface FileInfo extends Schema<"FileInfo"> {}

/**
 * One page of a directory's listing (Files.listPage). Entries are in listing
 * order: by path compared one component at a time in byte order (a
 * directory, then its contents, then its next sibling; at depth 1, by name).
 * (Schema `FileList`.)
 */
export interface FileListPage extends Schema<"FileList"> {}

/** A stored secret as the server describes it: never its value (no answer, log or error of the server contains it). (Schema `Secret`.) */
export interface SecretInfo extends Schema<"Secret"> {}

/**
 * A snapshot's record as the server returns it: a running sandbox saved
 * whole (memory, processes, files), from which new sandboxes start
 * (`Sandbox.create({ snapshot })`); its size in bytes, its cost in
 * micro-dollars. (Schema `Snapshot`.)
 */
export interface SnapshotInfo extends Schema<"Snapshot"> {}

/**
 * A volume: storage that outlives sandboxes, owned by the key that made it
 * and named among its volumes. Its size in MiB is a hard quota on its files,
 * counted in the key's disk quota and billed at the storage price; usedBytes
 * and capacityBytes are bytes; mountedBy names the sandboxes (not stopped)
 * that mount it. (Schema `Volume`.)
 */
export interface VolumeInfo extends Schema<"Volume"> {}

/** A volume a sandbox mounts: its name, the absolute path inside the sandbox, and whether it is read-only. (Schema `VolumeMount`.) */
export interface VolumeMount extends Schema<"VolumeMount"> {}

/**
 * One change a file watch reports (Files.watch): "create", "write"
 * (contents changed), "remove", "rename" (`oldPath` to `path`), "chmod"
 * (mode, owner or times changed) or "overflow" (`dropped` events were lost,
 * 0 when the sandbox's kernel lost an unknown number); `path` is absolute
 * inside the sandbox, `time` RFC 3339 UTC with nanoseconds. (Schema
 * `WatchEvent`.)
 */
export interface WatchEvent extends Omit<Schema<"WatchEvent">, "type" | "code" | "message"> {
  /** What happened. The stream's other lines never reach you: "ready" is read before Files.watch resolves, heartbeats are skipped, and an "error" line (with its code and message) is thrown as the APIError of its code. */
  type: Exclude<Schemas["WatchEvent"]["type"], "ready" | "heartbeat" | "error">;
}

/** An API key as the server describes it; limits in micro-dollars per UTC day, quotas in MiB and sandboxes. (Schema `Key`.) */
export interface KeyInfo extends Schema<"Key"> {}

/** How a usage report groups its rows: by UTC day, by sandbox or by API key. */
export type GroupBy = Schemas["UsageReport"]["groupBy"];

/**
 * The metered usage and cost of one group of sandboxes (a day, a sandbox or
 * a key) within a report's window, in CPU-seconds, GiB-seconds and
 * micro-dollars. The figures come from the server's ledger: every running
 * sandbox is sampled every few seconds (`serve --meter-interval`) and once
 * when it stops; a sampled interval counts in the window and day in which
 * it ends. (Schema `UsageRow`.)
 */
export interface UsageRow extends Schema<"UsageRow"> {}

/**
 * One sample of a sandbox's resource use, measured by the host
 * (Sandbox.metrics): CPU used since the sample before as a percentage of
 * its vCPUs, memory and disk used against their sizes, in bytes. (Schema
 * `SandboxMetric`.)
 */
export interface SandboxMetric extends Schema<"SandboxMetric"> {}

/** A signed file URL (Files.signedUrl): one operation on one file, no API key, until expiresAt. (Schema `FileURL`.) */
export interface FileURL extends Schema<"FileURL"> {}

/** The body of GET /v1/sandboxes/{id}/metrics. (Schema `SandboxMetrics`.) */
export interface SandboxMetrics extends Schema<"SandboxMetrics"> {}

/** The prices a usage report was computed with, in micro-dollars (the server's `serve --price-cpu`, `--price-memory`, `--cpu-floor`, `--price-storage`). (Schema `UsagePrices`.) */
export interface UsagePrices extends Schema<"UsagePrices"> {}

/** A whole usage report (GET /v1/usage): its window, prices, rows and total. (Schema `UsageReport`.) */
export interface UsageReport extends Schema<"UsageReport"> {}

/** A trial key's allowance of sandbox-hours (the wall time of all its sandboxes, ever). (Schema `UsageTrial`.) */
export interface UsageTrial extends Schema<"UsageTrial"> {}

/** Where a template made from an image or a Dockerfile came from. (Schema `TemplateOrigin`.) */
export interface TemplateOrigin extends Schema<"TemplateOrigin"> {}

/** A root filesystem sandboxes start from (`Sandbox.create({ template })`); its size in bytes, and for a warm template its `start`. (Schema `Template`.) */
export interface Template extends Schema<"Template"> {}

/**
 * What a warm template's sandboxes run before they are handed out: a start
 * command left running, a ready check that passed, or the default code
 * context's kernel (`kernel`); every create starts from a snapshot taken
 * then. (Schema `TemplateStart`.)
 */
export interface TemplateStart extends Schema<"TemplateStart"> {}

/**
 * One event of a template build's progress, as `onEvent` receives it:
 * "step" (a step begins, or ends when `done`: pulling and extracting a
 * layer, a Dockerfile instruction) or "output" (what a RUN printed, in
 * `data`). The build's result is what the method resolves to ("template")
 * or rejects with ("error"). (Schema `TemplateEvent`.)
 */
export interface TemplateEvent extends Omit<Schema<"TemplateEvent">, "type"> {
  /** "step", "output", "template" or "error"; the server's heartbeat lines are skipped, as in ExecEvent. */
  type: Exclude<Schemas["TemplateEvent"]["type"], "heartbeat">;
}

/** A background process as the server describes it: its pid, what it runs, whether it still runs, its terminal's size (`pty`) and how it ended. (Schema `Process`.) */
export interface ProcessInfo extends Schema<"Process"> {}

/** A terminal's size in character cells: `cols` and `rows`, each 1 to 1000. (Schema `PtySize`.) */
export interface PtySize extends Schema<"PtySize"> {}

/** A JSON message a client sends on a terminal's WebSocket: `{type: "resize", cols, rows}` or `{type: "signal", signal}`. (Schema `TerminalControl`.) */
export interface TerminalControl extends Schema<"TerminalControl"> {}

/**
 * A JSON message the server sends on a terminal's WebSocket: "exit" (the
 * program ended: exitCode, signal and the flags; the last message),
 * "dropped" (this connection fell more than 1 MiB behind; `dropped` is the
 * bytes it missed in all) or "error" (a control message it could not
 * accept, or the sandbox stopped or paused). (Schema `TerminalEvent`.)
 */
export interface TerminalEvent extends Schema<"TerminalEvent"> {}

// The options of the template calls: what the SDK takes, not what travels.

/** Options of Client.createTemplate and Client.uploadTemplate. */
export interface TemplateOptions {
  /** Called with each step event (and, for a Dockerfile, each output event) as it happens. */
  onEvent?: (ev: TemplateEvent) => void;
  /** Aborts the build; the server then leaves nothing behind. */
  signal?: AbortSignal;
  /**
   * Makes the template warm: the build starts `command` (for buildTemplate, the Dockerfile's CMD by default),
   * waits for `readyCommand` to exit 0 (at most `readyTimeoutSeconds`, default 60; the build fails with its last
   * output otherwise) and saves the sandbox, so every create finds the server running.
   */
  start?: TemplateStart;
}

/** Options of Client.uploadTemplate. */
export interface UploadTemplateOptions extends TemplateOptions {
  /** Recorded as the template's origin (at most 1024 bytes; default "upload"). */
  label?: string;
}

/** Options of Client.buildTemplate. */
export interface BuildTemplateOptions extends TemplateOptions {
  /** The Dockerfile's path on this machine (default CONTEXT/Dockerfile); it may lie outside the context. */
  dockerfile?: string;
  /** The Dockerfile itself, instead of a file. */
  dockerfileContent?: string;
  /** The ARGs' values. */
  buildArgs?: Record<string, string>;
  /** Let RUN steps reach the internet. */
  internet?: boolean;
  /** The hosts (or CIDRs) RUN steps may reach, such as a package index: RUN has no network by default. */
  allow?: string[];
}

/** A `docker save` tarball for Client.uploadTemplate: bytes, a Blob, or a stream of bytes (uploaded as it is read). */
export type TemplateTarball = Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;
