// The four sandbox tools (runtime_exec, runtime_read_file,
// runtime_write_file, runtime_list_files): their argument checks, what each
// runs in the sandbox, and the result text the model reads, as the Go SDK's
// tools package writes it.
import { posix } from "node:path";

import { APIError, WithRuntimeError } from "../errors.js";
import type { CallOptions } from "../http.js";
import type { Sandbox } from "../sandbox.js";
import { WORKSPACE, type ExecResult, type FileInfo, type FileListPage } from "../types.js";
import { ArgsError, decodeArgs, type Args, type Field } from "./args.js";
import { CapBuf, marker } from "./capbuf.js";
import { definitionOf, type ToolName } from "./definitions.js";
import {
  errorResult,
  type ExecOutput,
  type ListOutput,
  type ReadOutput,
  type SandboxFunc,
  type Tool,
  type ToolResult,
  type WriteOutput,
} from "./result.js";

/** Tool names. */
export const EXEC_NAME = "runtime_exec";
export const READ_FILE_NAME = "runtime_read_file";
export const WRITE_FILE_NAME = "runtime_write_file";
export const LIST_FILES_NAME = "runtime_list_files";

/** Each of stdout and stderr in a runtime_exec result is capped at this (16 KiB): the first and last halves are kept. */
export const MAX_OUTPUT_BYTES = 16 << 10;
/** The text of a file in a runtime_read_file result is capped at this (32 KiB): the first and last halves are kept. */
export const MAX_READ_BYTES = 32 << 10;
/** A binary (non-UTF-8) file is shown base64-encoded, its first 12 KiB only. */
export const MAX_READ_BINARY_BYTES = 12 << 10;
/** The largest file runtime_read_file reads through to find its tail (64 MiB); of a larger file only the head is shown. */
export const MAX_READ_SCAN_BYTES = 64 << 20;
/** The most entries a runtime_list_files result shows. */
export const MAX_LIST_ENTRIES = 500;
/** runtime_exec's timeout when timeoutSeconds is 0, and the largest it accepts. */
export const DEFAULT_TIMEOUT_SECONDS = 120;
export const MAX_TIMEOUT_SECONDS = 1800;
/** Bounds on the arguments, in UTF-8 bytes: a command line, a path, a file's content. */
export const MAX_COMMAND_BYTES = 256 << 10;
export const MAX_PATH_BYTES = 4096;
export const MAX_CONTENT_BYTES = 8 << 20;

/**
 * An error from the sandbox that the model can fix (no such file, a
 * directory where a file was wanted) becomes an error result; the sandbox
 * being gone or the server failing is thrown. hint, if set, is added to a
 * not-found message.
 */
function apiResult(err: unknown, hint = ""): ToolResult {
  if (err instanceof APIError) {
    switch (err.status) {
      case 404:
        return errorResult(hint ? `${err.message} (${hint})` : err.message);
      case 400:
      case 403:
      case 409:
      case 413:
      case 507:
        return errorResult(err.message);
    }
  }
  throw err;
}

/** Makes p absolute: relative paths are under /workspace; ".." resolves inside the sandbox's filesystem. */
export function resolvePath(p: string): string {
  return posix.resolve(WORKSPACE, p);
}

// checkExec, checkRead and checkWrite refuse values the schema allows but
// the tools do not, before any sandbox is involved.
function checkExec(a: Args): string {
  if ((a.str["command"] ?? "").trim() === "") return `"command" is empty; give a shell command line such as "ls -la"`;
  const t = a.num["timeoutSeconds"] ?? 0;
  if (t < 0 || t > MAX_TIMEOUT_SECONDS) {
    return `"timeoutSeconds" is ${t}; give 0 for the default of ${DEFAULT_TIMEOUT_SECONDS} seconds, or up to ${MAX_TIMEOUT_SECONDS}`;
  }
  return "";
}

function checkRead(a: Args): string {
  if (!a.str["path"]) return `"path" is empty; give the file to read, such as "hello.py"`;
  return "";
}

function checkWrite(a: Args): string {
  if (!a.str["path"]) return `"path" is empty; give the file to write, such as "hello.py"`;
  const p = resolvePath(a.str["path"]);
  if (p === "/" || p === WORKSPACE) return `${p} is a directory; give a file path such as ${posix.join(p, "main.py")}`;
  return "";
}

function section(name: string, text: string): string {
  if (text === "") return `${name}: (empty)\n`;
  return `${name}:\n${text}${text.endsWith("\n") ? "" : "\n"}`;
}

async function runExec(sbx: Sandbox, a: Args, opts: CallOptions): Promise<ToolResult> {
  const command = a.str["command"]!;
  let timeout = a.num["timeoutSeconds"] ?? 0;
  if (timeout === 0) timeout = DEFAULT_TIMEOUT_SECONDS;
  const cwd = a.str["cwd"] ? resolvePath(a.str["cwd"]) : WORKSPACE;
  const stdout = new CapBuf(MAX_OUTPUT_BYTES);
  const stderr = new CapBuf(MAX_OUTPUT_BYTES);
  const enc = new TextEncoder();
  let res: ExecResult | undefined;
  try {
    for await (const ev of sbx.execStream({ command, cwd, timeoutSeconds: timeout }, opts)) {
      if (ev.type === "stdout") stdout.write(enc.encode(ev.data ?? ""));
      else if (ev.type === "stderr") stderr.write(enc.encode(ev.data ?? ""));
      else if (ev.type === "exit") res = ev.result;
    }
  } catch (err) {
    if (err instanceof APIError && err.status === 400) return errorResult(err.message); // such as a cwd that does not exist
    throw err;
  }
  if (!res) throw new WithRuntimeError("tools: exec stream ended without a result");
  const [outText, outCut] = stdout.text("stdout");
  const [errTextOut, errCut] = stderr.text("stderr");
  const out: ExecOutput = {
    exitCode: res.exitCode,
    stdout: outText,
    stderr: errTextOut,
    stdoutCutBytes: outCut,
    stderrCutBytes: errCut,
    timedOut: res.timedOut,
    oomKilled: res.oomKilled ?? false,
    ...(res.signal ? { signal: res.signal } : {}),
    cwd,
    durationMs: res.durationMs,
  };
  let text = `exit_code: ${res.exitCode}\n`;
  if (res.timedOut) {
    text += `note: the command was killed by its timeout after ${timeout} seconds; give a larger timeoutSeconds (up to ${MAX_TIMEOUT_SECONDS}) or run it in the background\n`;
  } else if (res.oomKilled) {
    text += "note: the command was killed because the sandbox ran out of memory\n";
  } else if (res.processLimitKilled) {
    text += "note: the command was killed because it kept the sandbox at its process limit (too many processes)\n";
  } else if (res.signal) {
    text += `note: the command was killed by ${res.signal}\n`;
  }
  text += section("stdout", out.stdout) + section("stderr", out.stderr);
  return { text: text.replace(/\n$/, ""), isError: false, data: out };
}

/** Whether b is UTF-8 text: valid UTF-8 without NUL bytes. */
function isText(b: Uint8Array): boolean {
  if (b.includes(0)) return false;
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(b);
    return true;
  } catch {
    return false;
  }
}

async function runReadFile(sbx: Sandbox, a: Args, opts: CallOptions): Promise<ToolResult> {
  const p = resolvePath(a.str["path"]!);
  let fi: FileInfo;
  try {
    fi = await sbx.files.stat(p, opts);
  } catch (err) {
    return apiResult(err, "runtime_list_files shows a directory's contents");
  }
  if (fi.type === "dir") return errorResult(`${p} is a directory; list it with runtime_list_files`);
  let stream: ReadableStream<Uint8Array>;
  try {
    stream = await sbx.files.open(p, opts);
  } catch (err) {
    return apiResult(err);
  }
  const buf = new CapBuf(MAX_READ_BYTES);
  const scan = fi.size > MAX_READ_SCAN_BYTES ? MAX_READ_BYTES : MAX_READ_SCAN_BYTES; // a huge file: its head only
  let n = 0;
  const reader = stream.getReader();
  try {
    while (n < scan) {
      const { done, value } = await reader.read();
      if (done) break;
      const chunk = value.subarray(0, Math.min(value.length, scan - n));
      buf.write(chunk);
      n += chunk.length;
    }
  } catch (err) {
    if (opts.signal?.aborted) throw opts.signal.reason ?? err;
    throw new WithRuntimeError(`tools: reading ${p}: ${(err as Error).message}`, { cause: err });
  } finally {
    reader.cancel().catch(() => {});
  }
  const size = Math.max(fi.size, n);
  const [head, tail, cut] = buf.parts();
  const dec = new TextDecoder();
  if (isText(head) && isText(tail)) {
    let content = dec.decode(head);
    if (cut > 0) content += marker(cut, n, "the file") + dec.decode(tail);
    if (n < size) {
      content += `\n[... only the first ${n} of ${size} bytes are shown; read other parts with runtime_exec, e.g. tail -c 4000 ${p} ...]\n`;
    }
    const out: ReadOutput = { path: p, size, encoding: "utf-8", content, cutBytes: size - head.length - tail.length };
    return { text: `${p} (${size} bytes, encoding: utf-8)\n${content}`, isError: false, data: out };
  }
  const raw = buf.prefix(MAX_READ_BINARY_BYTES);
  const out: ReadOutput = {
    path: p,
    size,
    encoding: "base64",
    content: Buffer.from(raw).toString("base64"),
    cutBytes: size - raw.length,
  };
  let text = `${p} (${size} bytes, encoding: base64; the file is not UTF-8 text, so its bytes are shown base64-encoded)\n${out.content}`;
  if (out.cutBytes > 0) {
    text += `\n[... only the first ${raw.length} of ${size} bytes are shown; inspect the rest with runtime_exec, e.g. xxd -s ${raw.length} -l 256 ${p} ...]`;
  }
  return { text, isError: false, data: out };
}

async function runWriteFile(sbx: Sandbox, a: Args, opts: CallOptions): Promise<ToolResult> {
  const p = resolvePath(a.str["path"]!);
  let fi: FileInfo;
  try {
    fi = await sbx.files.writeFile(p, a.str["content"] ?? "", opts);
  } catch (err) {
    return apiResult(err);
  }
  const out: WriteOutput = { path: fi.path, bytes: fi.size };
  return { text: `wrote ${fi.size} bytes to ${fi.path}`, isError: false, data: out };
}

async function runListFiles(sbx: Sandbox, a: Args, opts: CallOptions): Promise<ToolResult> {
  const p = a.str["path"] ? resolvePath(a.str["path"]) : WORKSPACE;
  // One page of MAX_LIST_ENTRIES: the server counts the rest (total), so a
  // directory of any size is answered at once.
  let page: FileListPage;
  try {
    page = await sbx.files.listPage(p, { ...opts, depth: 1, limit: MAX_LIST_ENTRIES });
  } catch (err) {
    return apiResult(err);
  }
  const entries = page.entries.slice(0, MAX_LIST_ENTRIES);
  const total = Math.max(entries.length, page.total ?? 0);
  const out: ListOutput = { path: p, entries, total, truncated: page.truncated || total > entries.length };
  let text: string;
  if (out.truncated && total === entries.length) text = `${p}: more than ${total} entries`;
  else if (total === 0) text = `${p}: empty directory`;
  else if (total === 1) text = `${p}: 1 entry`;
  else text = `${p}: ${total} entries`;
  if (out.truncated) text += `; the first ${entries.length} (by name) are shown`;
  for (const e of out.entries) {
    let name = e.name;
    let size = String(e.size);
    if (e.type === "dir") {
      name += "/";
      size = "-";
    } else if (e.type === "symlink") {
      name += " -> " + (e.target ?? "");
    }
    text += `\n${e.type.padEnd(7)} ${size.padStart(10)}  ${name}`;
  }
  if (out.truncated) {
    const more = total > entries.length ? `${total - entries.length} more entries` : "more entries";
    text += `\n[... ${more} not shown; use runtime_exec with ls or find to see them ...]`;
  }
  return { text, isError: false, data: out };
}

/** One tool: its arguments, checks and function. */
interface Spec {
  name: ToolName;
  example: string;
  fields: Field[];
  check?: (a: Args) => string;
  run: (sbx: Sandbox, a: Args, opts: CallOptions) => Promise<ToolResult>;
}

const specs: Spec[] = [
  {
    name: EXEC_NAME,
    example: `{"command": "python3 hello.py", "cwd": "", "timeoutSeconds": 0}`,
    fields: [
      { name: "command", essential: true, max: MAX_COMMAND_BYTES },
      { name: "cwd", max: MAX_PATH_BYTES },
      { name: "timeoutSeconds", integer: true },
    ],
    check: checkExec,
    run: runExec,
  },
  {
    name: READ_FILE_NAME,
    example: `{"path": "hello.py"}`,
    fields: [{ name: "path", essential: true, max: MAX_PATH_BYTES }],
    check: checkRead,
    run: runReadFile,
  },
  {
    name: WRITE_FILE_NAME,
    example: `{"path": "hello.py", "content": "print(6 * 7)\\n"}`,
    fields: [
      { name: "path", essential: true, max: MAX_PATH_BYTES },
      { name: "content", essential: true, max: MAX_CONTENT_BYTES },
    ],
    check: checkWrite,
    run: runWriteFile,
  },
  {
    name: LIST_FILES_NAME,
    example: `{"path": ""}`,
    fields: [{ name: "path", max: MAX_PATH_BYTES }],
    run: runListFiles,
  },
];

/** Binds the four tools to the sandbox that get returns at each call (so it can create one on first use, or replace one whose lease ended). */
export function bindTools(get: SandboxFunc): Tool[] {
  return specs.map((s): Tool => {
    const def = definitionOf(s.name);
    return {
      name: def.name,
      description: def.description,
      inputSchema: def.inputSchema,
      async execute(args: unknown, opts: CallOptions = {}): Promise<ToolResult> {
        let a: Args;
        try {
          a = decodeArgs(args, s.fields);
        } catch (err) {
          if (!(err instanceof ArgsError)) throw err;
          return errorResult(`invalid arguments for ${s.name}: ${err.message}. Expected arguments: ${s.example}`);
        }
        const msg = s.check?.(a);
        if (msg) return errorResult(msg);
        const sbx = await get(opts);
        return s.run(sbx, a, opts);
      },
    };
  });
}

/** The four tools bound to sbx, in the order runtime_exec, runtime_read_file, runtime_write_file, runtime_list_files. */
export function sandboxTools(sbx: Sandbox): Tool[] {
  return bindTools(() => sbx);
}

