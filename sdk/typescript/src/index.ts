/**
 * withruntime: the TypeScript SDK of Runtime, a self-hosted gVisor sandbox
 * server for running a language model's code.
 *
 * ```ts
 * import { Sandbox } from "withruntime";
 *
 * await using sbx = await Sandbox.create({ timeoutSeconds: 600 });
 * await sbx.files.write("hello.py", "print(6 * 7)\n");
 * const res = await sbx.exec("python3 hello.py");
 * // res.exitCode === 0, res.stdout === "42\n"; a non-zero exit is a result too
 * ```
 *
 * The server is found in WITHRUNTIME_URL and WITHRUNTIME_API_KEY, else in
 * the CLI's config file ~/.config/withruntime/config.json {"url", "apiKey"},
 * else a NotConfiguredError says how to configure one. Every error answer
 * is an APIError (status, code, message), of the subclass of its code:
 * NotFoundError, LeaseEndedError, ....
 *
 * The model tools are in withruntime/tools.
 *
 * @module
 */
export { CONFIG_FILE, ENV_API_KEY, ENV_URL, type CallOptions, type ClientOptions, type RequestOptions } from "./http.js";
export type { CreateKeyOptions, UsageQuery } from "./account.js";
export {
  CODE_INTERPRETER_TEMPLATE,
  DATAFRAME_MIME,
  DEFAULT_CODE_TIMEOUT_SECONDS,
  Execution,
  Result,
  type Chart,
  type ChartElement,
  type CodeContext,
  type CreateContextOptions,
  type ExecutionData,
  type ExecutionError,
  type Logs,
  type OutputMessage,
  type ResultData,
  type RunCodeOptions,
} from "./code.js";
export * from "./errors.js";
export { eventData, stderrData, stdoutData, type Command, type ExecToOptions, type OutputSink } from "./exec.js";
export { DEFAULT_IDLE_TIMEOUT_SECONDS, DEFAULT_RESPONSE_TIMEOUT_SECONDS } from "./wait.js";
export { configured, deviceLogin, loginURL, DEFAULT_SERVER_URL, type SavedConnection } from "./login.js";
export {
  Files,
  FileTransfer,
  DEFAULT_LIST_LIMIT,
  MAX_LIST_LIMIT,
  type FileData,
  type ListOptions,
  type ListPageOptions,
  type ReadOptions,
} from "./files.js";
export { FileWatch, WATCH_MAX_DIRS, WATCH_QUEUE_EVENTS, type WatchOptions } from "./watch.js";
export { VolumeFiles, MAX_VOLUME_MOUNTS, MIN_VOLUME_MIB, type VolumeListPageOptions } from "./volumes.js";
export { Client, ForkResult, Sandbox, type ConnectionOptions, type ListFilter, type PauseOptions, type SandboxOptions } from "./sandbox.js";
export { MAX_FORK_COUNT, type ForkAnswer, type ForkOptions, type SnapshotListOptions, type SnapshotOptions } from "./snapshots.js";
export {
  Pty,
  Terminal,
  DEFAULT_TERM,
  MAX_PTY_COLS,
  MAX_PTY_ROWS,
  MAX_TERMINAL_MESSAGE_BYTES,
  MAX_TERMINAL_VIEWERS,
  TERMINAL_REPLAY_BYTES,
  type ConnectTerminalOptions,
  type OnData,
  type TerminalExit,
  type TerminalOptions,
} from "./terminal.js";
export * from "./types.js";
