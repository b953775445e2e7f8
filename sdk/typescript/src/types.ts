// The JSON bodies of Runtime's HTTP API (api/openapi.yaml), as the server
// sends them. Field names are the wire names, so these objects are the
// server's answers as they are; the Go SDK's wire.go has the same types.

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

/**
 * A sandbox's network policy, enforced on the host: `{ internet: false }`
 * (the default: nothing but loopback), `{ internet: true }` (every public
 * destination, minus `deny`), or `{ allow: [...] }` (only what it lists).
 * Private, loopback, link-local, CGNAT and metadata addresses are never
 * reached. The server checks a policy: an invalid one (such as `allow` with
 * `internet: true`) is a BadRequestError saying what is wrong. Answers
 * leave out empty lists.
 */
export interface NetworkPolicy {
  /** Allow every public destination not on `deny`. */
  internet?: boolean;
  /**
   * What the sandbox may reach when `internet` is false: host names
   * (`api.example.com`), wildcards (`*.example.org`: every subdomain, not the
   * apex), IP addresses and CIDRs (`203.0.113.0/24`).
   */
  allow?: string[];
  /** Exceptions, in the same forms as `allow`; deny wins over allow. */
  deny?: string[];
}

/** The body of POST /v1/sandboxes. Every field is optional; zero values take the server's defaults. */
export interface CreateSandboxRequest {
  template?: string;
  timeoutSeconds?: number;
  cpu?: number;
  memoryMiB?: number;
  diskMiB?: number;
  env?: Record<string, string>;
  metadata?: Record<string, string>;
  network?: NetworkPolicy;
  /** Names of stored secrets (Client.setSecret) the sandbox may use. */
  secrets?: string[];
  /** Refuse the sandbox (CostCapError) if its first lease could cost more, in micro-dollars. */
  maxCostMicros?: number;
  /** What the lease end does: "stop" (default) or "pause". */
  onLeaseEnd?: "stop" | "pause";
  /** Whether a request while paused resumes the sandbox first (default: true when onLeaseEnd is "pause"). */
  autoResume?: boolean;
  /** A first command, run in the new sandbox as part of the create (Sandbox.createAndExec, Sandbox.runOnce). */
  exec?: ExecRequest;
}

/**
 * The answer to a create with a first command: the sandbox and how the
 * command ended. Exactly one of result and error is set (error: the
 * command could not run; the sandbox exists either way).
 */
export interface SandboxWithResult {
  sandbox: SandboxInfo;
  result?: ExecResult;
  error?: ErrorInfo;
}

/** A sandbox's record as the server returns it. */
export interface SandboxInfo {
  /** `sbx_` followed by 16 characters. */
  id: string;
  state: "starting" | "running" | "paused" | "stopped";
  template: string;
  /** RFC 3339, UTC. */
  createdAt: string;
  /** When the server destroys the sandbox unless the lease is extended (RFC 3339, UTC). */
  leaseEndsAt: string;
  /** Set once stopped. */
  endedAt?: string;
  /**
   * Why it stopped; set once stopped: "deleted", "lease_ended", "failed",
   * "out_of_memory" or "spending_limit" (its key reached its daily limit).
   */
  endReason?: string;
  /** vCPUs. */
  cpu: number;
  /** Memory size, in MiB. */
  memoryMiB: number;
  /** Cap on writes to the root filesystem, in MiB. */
  diskMiB: number;
  metadata: Record<string, string>;
  /**
   * What the sandbox has cost so far, in micro-dollars (1 USD = 1,000,000),
   * as of its last metering sample (every few seconds while it runs, and
   * once when it stops): CPU used (at least the CPU floor over its life)
   * plus memory size × time, at the server's prices, rounded once; the
   * figure Client.usage reports for it. create answers 0 (nothing is
   * metered yet); refresh, list, connect and setTimeout give the current
   * figure. A paused sandbox is billed only its image's size × time, at the
   * storage price.
   */
  costMicros: number;
  /** What the lease end does: "stop" or "pause". */
  onLeaseEnd: "stop" | "pause";
  /** Whether a request while paused resumes the sandbox first. */
  autoResume: boolean;
  /** When it was paused (RFC 3339, UTC); set only while paused. */
  pausedAt?: string;
  /** A paused sandbox's image size on the host, in bytes (its memory, processes and written files). */
  imageBytes?: number;
  /** The volumes it mounts (absent: none). */
  volumes?: VolumeMount[];
}

/** A volume a sandbox mounts: its name, the absolute path inside the sandbox, and whether it is read-only. */
export interface VolumeMount {
  name: string;
  path: string;
  readOnly?: boolean;
}

/** One command to run. Set exactly one of `command` and `argv`. */
export interface ExecRequest {
  /** A shell command line, run as `bash -c COMMAND`. */
  command?: string;
  /** A program and its arguments, run without a shell; the program is looked up in PATH. */
  argv?: string[];
  /** The working directory, absolute or relative to /workspace (default /workspace). It must exist. */
  cwd?: string;
  /** Added to (and overriding) the sandbox's environment for this command. */
  env?: Record<string, string>;
  /** Kill the command's process group after this many seconds (it then exits 124). 0 means 120. */
  timeoutSeconds?: number;
  /** Cap on each of stdout and stderr in a collected result. 0 means 1 MiB; at most 16 MiB. */
  maxOutputBytes?: number;
  /** The command's standard input (text). When empty the command reads end-of-file at once. */
  stdin?: string;
  /** "user" (default, uid 1000) or "root". */
  user?: string;
}

/** How a command ended and what it printed. A non-zero exitCode is a result, not an error. */
export interface ExecResult {
  /** The exit status; 128+N when killed by signal N; 124 when its timeout killed it; 127 when bash did not find the command. */
  exitCode: number;
  /** The signal that ended the command, such as "SIGKILL". */
  signal?: string;
  /** Standard output as UTF-8 text, capped at maxOutputBytes. Empty in a streamed exit event. */
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  /** Every byte the command wrote to stdout, kept or not. */
  stdoutBytes: number;
  stderrBytes: number;
  /** stdout was not valid UTF-8; stdoutBase64 has the exact bytes (see stdoutData). */
  stdoutLossy?: boolean;
  stderrLossy?: boolean;
  stdoutBase64?: string;
  stderrBase64?: string;
  timedOut: boolean;
  oomKilled?: boolean;
  /** The command was killed because it kept the sandbox at its process limit (a fork bomb; exitCode 137). */
  processLimitKilled?: boolean;
  /** Wall time from start to exit, in milliseconds. */
  durationMs: number;
}

/** The error object of every error answer and error event. */
export interface ErrorInfo {
  code: string;
  message: string;
}

/** One event of an exec stream (Sandbox.execStream). */
export interface ExecEvent {
  type: "start" | "stdout" | "stderr" | "exit" | "error";
  /** The command's process id (start events). */
  pid?: number;
  /** The chunk as UTF-8 text (stdout and stderr events); see eventData for the exact bytes. */
  data?: string;
  /** The chunk held bytes that are not UTF-8; dataBase64 has the exact bytes. */
  lossy?: boolean;
  dataBase64?: string;
  /** How the command ended (exit events). */
  result?: ExecResult;
  /** Why the stream ended (error events). */
  error?: ErrorInfo;
}

/** One file or directory in a sandbox. */
export interface FileInfo {
  /** The last element of path. */
  name: string;
  /** Absolute inside the sandbox. */
  path: string;
  type: "file" | "dir" | "symlink" | "other";
  /** In bytes. */
  size: number;
  /** Permission bits in octal, such as "0644". */
  mode: string;
  /** RFC 3339, UTC. */
  modTime: string;
  uid: number;
  gid: number;
  /** Where a symlink points. */
  target?: string;
}

/**
 * One page of a directory's listing (Files.listPage). Entries are in listing
 * order: by path compared one component at a time in byte order (a
 * directory, then its contents, then its next sibling; at depth 1, by name).
 */
export interface FileListPage {
  entries: FileInfo[];
  /** More entries follow: ask for them with cursor set to next. */
  truncated: boolean;
  /** The cursor of the next page (an opaque string); set only when truncated. */
  next?: string;
  /** The number of entries in the directory itself (its direct children, whatever the page); set only for depth 1. */
  total?: number;
}

/** A stored secret as the server describes it: never its value (no answer, log or error of the server contains it). */
export interface SecretInfo {
  /** The secret's name: the environment variable a sandbox created with `secrets: [name]` sees, holding a placeholder. */
  name: string;
  /** The id of the tenant key the secret belongs to; absent for the server's own secrets (those of keys without a daily limit). */
  owner?: string;
  /** The host names (or `*.wildcards`) whose HTTPS requests get the value. */
  hosts: string[];
  /** When the secret was first stored (RFC 3339, UTC). */
  createdAt: string;
  /** When its value or hosts last changed (RFC 3339, UTC). */
  updatedAt: string;
}

/** An API key as the server describes it. */
export interface KeyInfo {
  /** The key's id (`key_...`), used to revoke it. Not a credential. */
  id: string;
  /** The label given at creation. */
  name: string;
  /** The start of the secret (`wr_` and 6 more characters), to recognise it. */
  prefix: string;
  /** When it was created (RFC 3339, UTC). */
  createdAt: string;
  /** When it was revoked (RFC 3339, UTC); absent while it is live. */
  revokedAt?: string;
  /**
   * The bearer token (`wr_...`), only in the answer to Client.createKey: the
   * server cannot show it again. Pass it as `apiKey`.
   */
  secret?: string;
  /**
   * The key's spending limit in micro-dollars (1 USD = 1,000,000) per UTC
   * day; absent if it has none. Once the key's sandboxes have cost that
   * much today, they are stopped (endReason "spending_limit") and its
   * creates throw SpendingLimitError until midnight UTC.
   */
  dailyLimitMicros?: number;
  /**
   * The disk quota that binds the key, in MiB: its running and paused
   * sandboxes' diskMiB plus its pause images (its own, or the server's
   * default for a key with a daily limit); absent if none does. Past it a
   * create or pause fails with 507 `disk_quota_exceeded`.
   */
  diskQuotaMiB?: number;
  /** How many of the key's sandboxes may be paused at once; absent: no bound. Past it a pause fails with 429 `quota_exceeded`. */
  pausedQuota?: number;
  /** How many sandboxes the key may hold at once, starting, running and paused together; absent: no bound. Past it a create fails with 429 `quota_exceeded`. */
  sandboxesQuota?: number;
}

/** How a usage report groups its rows: by UTC day, by sandbox or by API key. */
export type GroupBy = "day" | "sandbox" | "key";

/**
 * The metered usage and cost of one group of sandboxes (a day, a sandbox or
 * a key) within a report's window. The figures come from the server's
 * ledger: every running sandbox is sampled every few seconds (`serve
 * --meter-interval`) and once when it stops; a sampled interval counts in
 * the window and day in which it ends.
 */
export interface UsageRow {
  /** The UTC day (`YYYY-MM-DD`), the sandbox id (`sbx_...`) or the key id (`key_...`); "total" for a report's total. */
  group: string;
  /** CPU time the sandboxes' own processes used, in CPU-seconds, as the host measures it (their host CPU less their isolation layer's), to the millisecond. */
  cpuSeconds: number;
  /** Host CPU time the sandboxes' isolation layer (gVisor's kernel and file proxy) spent, in CPU-seconds, not billed: the host's CPU cost is cpuSeconds + overheadCpuSeconds. */
  overheadCpuSeconds: number;
  /** CPU time billed, in CPU-seconds: per sandbox the larger of what it used and the floor (cpuFloorVcpu × its wall-clock seconds), summed. */
  billedCpuSeconds: number;
  /** Memory size × time running, in GiB-seconds. */
  gibSeconds: number;
  /** Paused sandboxes' image size × time paused, in GiB-seconds (a paused sandbox is billed no CPU and no memory). */
  storageGibSeconds: number;
  /** The cost in micro-dollars (1 USD = 1,000,000): billed CPU and memory at the report's prices, summed unrounded over the row's sandboxes and rounded once. */
  costMicros: number;
}

/** The prices a usage report was computed with (the server's configuration: `serve --price-cpu`, `--price-memory`, `--cpu-floor`). */
export interface UsagePrices {
  /** Micro-dollars per vCPU-hour of CPU used (reference 25,000 = $0.025). */
  cpuMicrosPerVcpuHour: number;
  /** Micro-dollars per GiB-hour of memory size (reference 7,500 = $0.0075). */
  memoryMicrosPerGibHour: number;
  /** The least CPU a running sandbox is billed, in vCPUs (reference 0.05). */
  cpuFloorVcpu: number;
  /** Micro-dollars per GiB-hour of a paused sandbox's image (`serve --price-storage`; default 100 = $0.0001). */
  storageMicrosPerGibHour: number;
}

/** A whole usage report (GET /v1/usage). */
export interface UsageReport {
  /** Start of the window, exclusive (RFC 3339, UTC). */
  from: string;
  /** End of the window, inclusive (RFC 3339, UTC). */
  to: string;
  groupBy: GroupBy;
  prices: UsagePrices;
  /** One row per group with usage in the window, sorted by group. */
  rows: UsageRow[];
  /** The total over every row; its costMicros is rounded once from all of them, so it may differ by a micro-dollar from the sum of the rows'. */
  total: UsageRow;
  /** Present for a trial key (`withruntime login --trial`): its sandbox-hours and what is left; at 0 left, creates answer 429. */
  trial?: UsageTrial;
}

/** A trial key's allowance of sandbox-hours (the wall time of all its sandboxes, ever). */
export interface UsageTrial {
  allowanceHours: number;
  usedHours: number;
  leftHours: number;
}

/** Where a template made from an image or a Dockerfile came from. */
export interface TemplateOrigin {
  /** The image reference it was made from, or an upload's label. */
  image: string;
  /** The image manifest's digest (`sha256:...`). */
  digest?: string;
  /** The image's environment (`KEY=value`); the template's sandboxes start with it, under a create's `env`. */
  env?: string[];
  /** The image's working directory, recorded only: commands start in /workspace. */
  workingDir?: string;
  /** What runs a command line: `/bin/bash`, `/bin/sh`, or "" when the image has no shell (then only an argv runs). */
  shell: string;
}

/** A root filesystem sandboxes start from (`Sandbox.create({ template })`). */
export interface Template {
  /** What `template` names. */
  name: string;
  /** When it was built (RFC 3339, UTC). */
  createdAt: string;
  /** Its root filesystem's size on disk, in bytes. */
  sizeBytes: number;
  /** Where a template made from an image or a Dockerfile came from; absent for one built from a built-in recipe (base). */
  origin?: TemplateOrigin;
}

/**
 * One event of a template build's progress, as `onEvent` receives it:
 * "step" (a step begins, or ends when `done`: pulling and extracting a
 * layer, a Dockerfile instruction) or "output" (what a RUN printed, in
 * `data`). The build's result is what the method resolves to ("template")
 * or rejects with ("error").
 */
export interface TemplateEvent {
  type: "step" | "output" | "template" | "error";
  /** What the step does, such as `pulling and extracting layer 2/3 (sha256:...), 12.0 MiB compressed` (step events). */
  step?: string;
  /** The step ended (step events). */
  done?: boolean;
  /** What a RUN step printed, stdout and stderr together, as UTF-8 text (output events). */
  data?: string;
  /** Seconds since the build started. */
  elapsedSeconds?: number;
  /** The new template (template events). */
  template?: Template;
  /** Why the build failed (error events). */
  error?: ErrorInfo;
}

/** Options of Client.createTemplate and Client.uploadTemplate. */
export interface TemplateOptions {
  /** Called with each step event (and, for a Dockerfile, each output event) as it happens. */
  onEvent?: (ev: TemplateEvent) => void;
  /** Aborts the build; the server then leaves nothing behind. */
  signal?: AbortSignal;
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
