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
 * A sandbox's network policy (api/openapi.yaml; enforced by the server from
 * the network release on). The default, `{ internet: false }`, is loopback
 * only.
 */
export interface NetworkPolicy {
  /** Open access to the internet. */
  internet?: boolean;
  /** Names (`api.example.com`, `*.example.org`) and CIDRs that may be reached. */
  allow?: string[];
  /** Names and CIDRs that may not be reached (a default-allow policy). */
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
}

/** A sandbox's record as the server returns it. */
export interface SandboxInfo {
  /** `sbx_` followed by 16 characters. */
  id: string;
  state: "starting" | "running" | "stopped";
  template: string;
  /** RFC 3339, UTC. */
  createdAt: string;
  /** When the server destroys the sandbox unless the lease is extended (RFC 3339, UTC). */
  leaseEndsAt: string;
  /** Set once stopped. */
  endedAt?: string;
  /** Set once stopped: "deleted", "lease_ended", "failed" or "orphaned". */
  endReason?: string;
  cpu: number;
  memoryMiB: number;
  diskMiB: number;
  metadata: Record<string, string>;
  /** What the sandbox has cost so far, in micro-dollars (1 USD = 1,000,000), as of its last metering sample. */
  costMicros?: number;
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
