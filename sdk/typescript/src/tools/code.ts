// runtime_run_code, the code interpreter's tool: a set of its own (the
// four tools are unchanged). A port of the Go SDK's tools/code.go, whose
// declaration and text it gives byte for byte.
import { readFileSync } from "node:fs";

import type { CallOptions } from "../http.js";
import type { Execution, Result } from "../code.js";
import { APIError, UnsupportedError } from "../errors.js";
import type { Sandbox } from "../sandbox.js";
import { ArgsError, decodeArgs, type Args, type Field } from "./args.js";
import { CapBuf } from "./capbuf.js";
import { chartText } from "./chart.js";
import type { Definition } from "./definitions.js";
import { errorResult, type ImageOutput, type SandboxFunc, type Tool, type ToolResult } from "./result.js";

/** The code interpreter tool's name. */
export const RUN_CODE_NAME = "runtime_run_code";
/** Bounds the code argument, in bytes. */
export const MAX_CODE_BYTES = 256 << 10;
/** How many images one result carries; more are named in the text only. */
export const MAX_IMAGES = 4;
/** Bounds one image, decoded, in bytes (the providers' limit is about 5 MB). */
export const MAX_IMAGE_BYTES = 5 << 20;
/** Caps the text of each rich result in the summary. */
export const MAX_RESULT_TEXT_BYTES = 8 << 10;
/** How long a call may run before it is interrupted (the context keeps its variables). */
export const CODE_TIMEOUT_SECONDS = 120;
const MAX_OUTPUT_BYTES = 16 << 10;

const codeDefinition = JSON.parse(readFileSync(new URL("../../definitions/runtime_run_code.json", import.meta.url), "utf8")) as Definition;

/** runtime_run_code's declaration. */
export function codeDefinitions(): Definition[] {
  return [structuredClone(codeDefinition)];
}

const fields: Field[] = [
  { name: "code", essential: true, max: MAX_CODE_BYTES },
  { name: "language", max: 64 },
];

/** The languages runtime_run_code takes (E2B's short names among them), each to the name the server knows it by. */
const codeLanguages: Record<string, string> = {
  "": "", python: "", python3: "", py: "",
  javascript: "javascript", js: "javascript", typescript: "typescript", ts: "typescript",
  r: "r", bash: "bash", sh: "bash", java: "java",
};

function checkRunCode(a: Args): string {
  const lang = a.str["language"] ?? "";
  if (!Object.hasOwn(codeLanguages, lang.toLowerCase())) {
    return `language ${JSON.stringify(lang)} is not available; runtime_run_code runs python, javascript, typescript, r, bash or java (use runtime_exec for other languages)`;
  }
  if ((a.str["code"] ?? "").trim() === "") return "code is empty; give the code to run";
  return "";
}

/** Binds runtime_run_code to the sandbox get returns at each call. */
export function bindCodeInterpreter(get: SandboxFunc): Tool[] {
  const def = codeDefinitions()[0]!;
  return [
    {
      name: def.name,
      description: def.description,
      inputSchema: def.inputSchema,
      async execute(args: unknown, opts: CallOptions = {}): Promise<ToolResult> {
        let a: Args;
        try {
          a = decodeArgs(args, fields);
        } catch (err) {
          if (!(err instanceof ArgsError)) throw err;
          return errorResult(`invalid arguments for ${RUN_CODE_NAME}: ${err.message}. Expected arguments: {"code": "x = 6 * 7\\nx", "language": ""}`);
        }
        const msg = checkRunCode(a);
        if (msg) return errorResult(msg);
        const sbx = await get(opts);
        let ex: Execution;
        try {
          const language = codeLanguages[(a.str["language"] ?? "").toLowerCase()];
          ex = await sbx.runCode(a.str["code"]!, {
            timeoutSeconds: CODE_TIMEOUT_SECONDS,
            ...(language ? { language } : {}),
            ...(opts.signal ? { signal: opts.signal } : {}),
          });
        } catch (err) {
          if (err instanceof UnsupportedError) {
            return errorResult(`this sandbox has no Python kernel (it is not of the "code-interpreter" template); use runtime_exec to run python3 instead`);
          }
          if (err instanceof APIError && [400, 403, 404, 409, 413, 507].includes(err.status)) return errorResult(err.message);
          throw err;
        }
        const [text, images] = summarizeExecution(ex);
        const res: ToolResult = { text, isError: false, data: executionData(ex) };
        if (images.length > 0) res.images = images;
        return res;
      },
    },
  ];
}

/** The code interpreter's tool set, [runtime_run_code], bound to sbx (a "code-interpreter" sandbox). */
export function codeInterpreterTools(sbx: Sandbox): Tool[] {
  return bindCodeInterpreter(() => sbx);
}

function executionData(ex: Execution): Record<string, unknown> {
  return {
    contextId: ex.contextId,
    results: ex.results.map((r) => r.toJSON()),
    logs: ex.logs,
    ...(ex.error ? { error: ex.error } : {}),
    executionCount: ex.executionCount,
    durationMs: ex.durationMs,
  };
}

const enc = new TextEncoder();

function capped(text: string, limit: number, what: string): string {
  const c = new CapBuf(limit);
  c.write(enc.encode(text));
  return c.text(what)[0];
}

function pngSize(b: Uint8Array): [number, number] | undefined {
  const sig = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
  if (b.length < 24 || sig.some((v, i) => b[i] !== v) || String.fromCharCode(...b.slice(12, 16)) !== "IHDR") return undefined;
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const w = v.getUint32(16);
  const h = v.getUint32(20);
  return w > 0 && h > 0 ? [w, h] : undefined;
}

function jpegSize(b: Uint8Array): [number, number] | undefined {
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return undefined;
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let i = 2;
  while (i + 4 <= b.length) {
    if (b[i] !== 0xff) return undefined;
    const m = b[i + 1]!;
    if (m === 0xd8 || m === 0x01 || (m >= 0xd0 && m <= 0xd7)) {
      i += 2;
      continue;
    }
    const len = v.getUint16(i + 2);
    if (m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc) {
      if (i + 9 > b.length) return undefined;
      const h = v.getUint16(i + 5);
      const w = v.getUint16(i + 7);
      return w > 0 && h > 0 ? [w, h] : undefined;
    }
    i += 2 + len;
  }
  return undefined;
}

/** A result's PNG or JPEG, checked (what the sandbox sent may be anything), or why not. */
function resultImage(r: Result): [ImageOutput | undefined, string] {
  for (const mime of ["image/png", "image/jpeg"]) {
    const s = r.data[mime];
    if (typeof s !== "string" || s === "") continue;
    if (Math.floor((s.length * 3) / 4) > MAX_IMAGE_BYTES + MAX_IMAGE_BYTES / 8) {
      return [undefined, `an image (${mime}) over ${MAX_IMAGE_BYTES} bytes, not attached`];
    }
    const clean = s.replace(/\s/g, "");
    let data: Uint8Array = new Uint8Array();
    if (/^[A-Za-z0-9+/]*={0,2}$/.test(clean) && clean.length % 4 === 0) data = new Uint8Array(Buffer.from(clean, "base64"));
    if (data.length === 0 || data.length > MAX_IMAGE_BYTES) {
      return [undefined, `an image (${mime}) that is not valid base64 or is over ${MAX_IMAGE_BYTES} bytes, not attached`];
    }
    const size = mime === "image/png" ? pngSize(data) : jpegSize(data);
    if (!size) return [undefined, `an image that does not decode as ${mime}, not attached`];
    return [{ mimeType: mime, data: Buffer.from(data).toString("base64"), width: size[0], height: size[1] }, ""];
  }
  return [undefined, ""];
}

/** The text the model reads for an Execution, and the images that go with it (the Go SDK's, byte for byte). */
export function summarizeExecution(ex: Execution): [string, ImageOutput[]] {
  let out = "";
  if (ex.notice && !ex.stateLost) out += `notice: ${ex.notice}\n`;
  out += `execution_count: ${ex.executionCount}\n`;
  for (const [name, s] of [
    ["stdout", ex.logs.stdout.join("")],
    ["stderr", ex.logs.stderr.join("")],
  ] as const) {
    out += s === "" ? `${name}: (empty)\n` : `${name}:\n${capped(s, MAX_OUTPUT_BYTES, name).replace(/\n+$/, "")}\n`;
  }
  const images: ImageOutput[] = [];
  for (const r of ex.results) {
    const label = r.isMainResult ? "result" : "display";
    const [img, why] = resultImage(r);
    if (img && images.length < MAX_IMAGES) {
      images.push(img);
      out += `${label}: image ${images.length} (${img.mimeType}, ${img.width}x${img.height}) attached\n`;
    } else if (img) {
      out += `${label}: an image (${img.mimeType}, ${img.width}x${img.height}) not attached: at most ${MAX_IMAGES} images are returned per call\n`;
    } else if (why) {
      out += `${label}: ${why}\n`;
    }
    if (r.chart) out += chartText(label, r.chart);
    const t = r.text ?? "";
    if (t !== "" && (!img || r.isMainResult)) out += `${label}:\n${capped(t, MAX_RESULT_TEXT_BYTES, label).replace(/\n+$/, "")}\n`;
  }
  if (ex.error) {
    out += `error: ${ex.error.name}: ${ex.error.value}\n`;
    const tb = ex.error.traceback.trim();
    if (tb !== "") out += `traceback:\n${capped(tb, MAX_OUTPUT_BYTES, "the traceback")}\n`;
  }
  return [out.replace(/\n+$/, ""), images];
}

/** The Anthropic tool_result block answering toolUseId: a text block, then an image block per image. */
export function anthropicToolResult(result: ToolResult, toolUseId: string): Record<string, unknown> {
  const content: Record<string, unknown>[] = [{ type: "text", text: result.text }];
  for (const img of result.images ?? []) {
    content.push({ type: "image", source: { type: "base64", media_type: img.mimeType, data: img.data } });
  }
  return { type: "tool_result", tool_use_id: toolUseId, content, ...(result.isError ? { is_error: true } : {}) };
}

/** The OpenAI Responses function_call_output answering callId, its output a list: input_text, then an input_image (data URL) per image. */
export function openAIResponsesOutput(result: ToolResult, callId: string): Record<string, unknown> {
  const output: Record<string, unknown>[] = [{ type: "input_text", text: result.text }];
  for (const img of result.images ?? []) output.push({ type: "input_image", image_url: `data:${img.mimeType};base64,${img.data}` });
  return { type: "function_call_output", call_id: callId, output };
}

/** Gemini parts answering a functionCall: the functionResponse, then an inlineData part per image. */
export function geminiParts(result: ToolResult, name: string, id = ""): Record<string, unknown>[] {
  const response = result.isError ? { error: result.text } : { output: result.text };
  const parts: Record<string, unknown>[] = [{ functionResponse: { ...(id ? { id } : {}), name, response } }];
  for (const img of result.images ?? []) parts.push({ inlineData: { mimeType: img.mimeType, data: img.data } });
  return parts;
}
