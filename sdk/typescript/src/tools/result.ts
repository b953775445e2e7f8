// What every tool shares: the result a call resolves to (ToolResult and the
// data of each sandbox tool), the Tool shape, the error results, and
// dispatch by name. The tool sets (sandbox.ts, code.ts) and the provider
// shapes (providers.ts) import it; it imports none of them.
import type { CallOptions } from "../http.js";
import { APIError, LeaseEndedError, SandboxStoppedError } from "../errors.js";
import type { Sandbox } from "../sandbox.js";
import type { FileInfo } from "../types.js";
import type { Definition } from "./definitions.js";

/** An image a tool produced, checked: its bytes decode as the MIME type says, within MAX_IMAGE_BYTES. */
export interface ImageOutput {
  /** "image/png" or "image/jpeg". */
  mimeType: string;
  /** The image, base64. */
  data: string;
  width: number;
  height: number;
}

/** The data of a runtime_exec result. */
export interface ExecOutput {
  /** The command's exit status (124 when its timeout killed it, 128+N when signal N did). */
  exitCode: number;
  /** The output as shown to the model: at most MAX_OUTPUT_BYTES each plus a marker where the middle was cut. */
  stdout: string;
  stderr: string;
  /** The bytes cut (0: none). */
  stdoutCutBytes: number;
  stderrCutBytes: number;
  timedOut: boolean;
  oomKilled: boolean;
  signal?: string;
  /** The absolute working directory the command ran in. */
  cwd: string;
  durationMs: number;
}

/** The data of a runtime_read_file result. */
export interface ReadOutput {
  /** The absolute path read. */
  path: string;
  /** The file's size in bytes. */
  size: number;
  /** "utf-8" (content is the text) or "base64" (content is the bytes, base64: the file is not UTF-8 text). */
  encoding: "utf-8" | "base64";
  /** What the model was shown, markers included. */
  content: string;
  /** The bytes of the file not shown (0: all shown). */
  cutBytes: number;
}

/** The data of a runtime_write_file result. */
export interface WriteOutput {
  path: string;
  bytes: number;
}

/** The data of a runtime_list_files result. */
export interface ListOutput {
  path: string;
  /** The first MAX_LIST_ENTRIES entries at most, by name. */
  entries: FileInfo[];
  /** How many entries the directory holds in all. */
  total: number;
  /** There were more than MAX_LIST_ENTRIES entries. */
  truncated: boolean;
}

/** The outcome of one tool call (the same JSON keys as the Go SDK's tools.Result). */
export interface ToolResult {
  /** What to give the model. */
  text: string;
  /**
   * The call could not be carried out (invalid arguments, no such file, the
   * sandbox is gone); text says why and what to do. A command that ran and
   * exited non-zero is not an error: its exit code is in text.
   */
  isError: boolean;
  /** The same result as a value for programs (runtime_run_code: the Execution's JSON). */
  data?: ExecOutput | ReadOutput | WriteOutput | ListOutput | Record<string, unknown>;
  /** runtime_run_code's images, checked to decode (see anthropicToolResult, openAIResponsesOutput, geminiParts). */
  images?: ImageOutput[];
}

/** One tool bound to a sandbox. */
export interface Tool extends Definition {
  /**
   * Runs one call with the model's arguments: the parsed JSON object (or
   * its JSON text). Resolves to the result for the model, also for a failed
   * command and for invalid arguments; rejects only when Runtime itself
   * failed (see errorResultFor).
   */
  execute(args: unknown, opts?: CallOptions): Promise<ToolResult>;
}

/** Returns the sandbox a tool call runs in; called once per call (see bindTools). */
export type SandboxFunc = (opts: CallOptions) => Promise<Sandbox> | Sandbox;

export function errorResult(text: string): ToolResult {
  return { text: "error: " + text, isError: true };
}

/** An error as the Go SDK prints it, so the model reads the same text from every SDK. */
export function errText(err: unknown): string {
  if (err instanceof APIError) return `withruntime: ${err.code} (${err.status}): ${err.message}`;
  if (err instanceof Error) return err.message;
  return String(err);
}

export function isAbort(err: unknown): boolean {
  return err instanceof Error && (err.name === "AbortError" || err.name === "TimeoutError") && !(err instanceof APIError);
}

/**
 * The result to give the model when execute threw (Runtime itself failed):
 * the sandbox is gone, the call was cancelled, or the sandbox could not be
 * reached.
 */
export function errorResultFor(err: unknown): ToolResult {
  if (err instanceof LeaseEndedError || err instanceof SandboxStoppedError) {
    return errorResult(`the sandbox is no longer running (${errText(err)}); its files are gone`);
  }
  if (isAbort(err)) return errorResult("the call was cancelled before it finished");
  return errorResult(`the sandbox could not be reached: ${errText(err)}`);
}

/** The tool named name. */
export function findTool(tools: Tool[], name: string): Tool | undefined {
  return tools.find((t) => t.name === name);
}

/** Runs the tool named name with args. An unknown name is an error result naming the tools there are. */
export async function dispatch(tools: Tool[], name: string, args: unknown, opts: CallOptions = {}): Promise<ToolResult> {
  const t = findTool(tools, name);
  if (!t) return errorResult(`there is no tool ${JSON.stringify(name)}; the tools are ${tools.map((t) => t.name).join(", ")}`);
  return t.execute(args, opts);
}

