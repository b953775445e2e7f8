/**
 * withruntime-ai-sdk: Runtime's four sandbox tools (runtime_exec,
 * runtime_read_file, runtime_write_file, runtime_list_files) as Vercel AI
 * SDK tools. A thin wrapper over withruntime/tools: names, descriptions,
 * JSON Schemas (given to the AI SDK unchanged with jsonSchema()), argument
 * checks, output caps and result text all come from the SDK.
 *
 * ```ts
 * import { generateText, stepCountIs } from "ai";
 * import { Sandbox } from "withruntime";
 * import { runtimeTools } from "withruntime-ai-sdk";
 *
 * await using sbx = await Sandbox.create({ timeoutSeconds: 600 });
 * const { text } = await generateText({
 *   model,
 *   tools: runtimeTools(sbx),
 *   stopWhen: stepCountIs(10),
 *   prompt: "Write hello.py that prints 6 * 7 and run it.",
 * });
 * ```
 *
 * @module
 */
import { jsonSchema, tool, type JSONSchema7, type Tool } from "ai";
import type { Sandbox } from "withruntime";
import {
  bindCodeInterpreter,
  bindTools,
  codeInterpreterTools as sdkCodeInterpreterTools,
  errorResultFor,
  sandboxTools,
  type SandboxFunc,
  type Tool as SDKTool,
  type ToolName,
  type ToolResult,
} from "withruntime/tools";

/** One Runtime tool as an AI SDK tool: its input is the model's arguments, its output the SDK's ToolResult. */
export type RuntimeTool = Tool<Record<string, unknown>, ToolResult>;

/** The four tools by name, for generateText/streamText's `tools` (or an Agent's). */
export type RuntimeToolSet = Record<ToolName, RuntimeTool>;

/**
 * Wraps one SDK tool. execute runs the SDK tool with the call's abort
 * signal; the model is given the result's text (an error result as
 * "error-text"), the step's toolResults keep the whole ToolResult (text,
 * isError, data). When Runtime itself failed (the sandbox is gone, the
 * server is unreachable) the model is given errorResultFor(err); an aborted
 * call rejects. A result with images (runtime_run_code's charts) is given
 * to the model as "content": a text part, then an "image-data" part (base64,
 * its media type) per image; providers that take no images in tool results
 * still read the text, which names each image and its size.
 */
export function toAISDKTool(t: SDKTool): RuntimeTool {
  return tool<Record<string, unknown>, ToolResult>({
    description: t.description,
    inputSchema: jsonSchema<Record<string, unknown>>(t.inputSchema as JSONSchema7),
    async execute(input, { abortSignal }) {
      try {
        return await t.execute(input, abortSignal ? { signal: abortSignal } : {});
      } catch (err) {
        if (abortSignal?.aborted) throw err;
        return errorResultFor(err);
      }
    },
    toModelOutput: ({ output }) => {
      const images = output.images ?? [];
      if (output.isError || images.length === 0) return { type: output.isError ? "error-text" : "text", value: output.text };
      return {
        type: "content",
        value: [
          { type: "text", text: output.text },
          ...images.map((img) => ({ type: "image-data" as const, data: img.data, mediaType: img.mimeType })),
        ],
      };
    },
  });
}

/** Wraps SDK tools (from sandboxTools or bindTools), keyed by name. */
export function fromSDKTools(tools: SDKTool[]): Record<string, RuntimeTool> {
  return Object.fromEntries(tools.map((t) => [t.name, toAISDKTool(t)]));
}

/**
 * The four tools bound to a sandbox: a Sandbox, or a function that returns
 * the sandbox for each call (bindTools: to create one on first use, or
 * replace one whose lease ended).
 */
export function runtimeTools(sandbox: Sandbox | SandboxFunc): RuntimeToolSet {
  const tools = typeof sandbox === "function" ? bindTools(sandbox) : sandboxTools(sandbox);
  return fromSDKTools(tools) as RuntimeToolSet;
}

/** The code interpreter's tool set by name: runtime_run_code alone. */
export type CodeInterpreterToolSet = Record<"runtime_run_code", RuntimeTool>;

/**
 * The code interpreter's tool, runtime_run_code (Python in a Jupyter kernel
 * that keeps variables between calls), bound to a sandbox of the
 * "code-interpreter" template, or to a function that returns one for each
 * call. Spread it next to runtimeTools(sbx) as you like. Charts reach the
 * model as image parts (see toAISDKTool); the step's toolResults keep the
 * SDK's ToolResult, images included.
 */
export function codeInterpreterTools(sandbox: Sandbox | SandboxFunc): CodeInterpreterToolSet {
  const tools = typeof sandbox === "function" ? bindCodeInterpreter(sandbox) : sdkCodeInterpreterTools(sandbox);
  return fromSDKTools(tools) as CodeInterpreterToolSet;
}
