/**
 * withruntime-openai-agents: Runtime's four sandbox tools (runtime_exec,
 * runtime_read_file, runtime_write_file, runtime_list_files) as OpenAI
 * Agents SDK (JavaScript) function tools. A thin wrapper over
 * withruntime/tools: names, descriptions, JSON Schemas (given to the Agents
 * SDK unchanged, strict: they are strict-mode schemas), argument checks,
 * output caps and result text all come from the SDK.
 *
 * ```ts
 * import { Agent, run } from "@openai/agents";
 * import { Sandbox } from "withruntime";
 * import { runtimeTools } from "withruntime-openai-agents";
 *
 * await using sbx = await Sandbox.create({ timeoutSeconds: 600 });
 * const agent = new Agent({ name: "coder", instructions: "...", tools: runtimeTools(sbx) });
 * const result = await run(agent, "Write hello.py that prints 6 * 7 and run it.");
 * ```
 *
 * @module
 */
import { tool, type FunctionTool, type ToolOutputImage, type ToolOutputText } from "@openai/agents-core";
import type { Sandbox } from "withruntime";
import {
  bindCodeInterpreter,
  bindTools,
  codeInterpreterTools as sdkCodeInterpreterTools,
  errorResultFor,
  sandboxTools,
  type SandboxFunc,
  type Tool as SDKTool,
} from "withruntime/tools";

/** The JSON Schema of a tool's parameters, in the Agents SDK's type. */
export type RuntimeToolParameters = Extract<FunctionTool["parameters"], { additionalProperties: false }>;

/** One Runtime tool as an Agents SDK function tool; its output (what the model is given) is the SDK result's text. */
export type RuntimeTool = FunctionTool<unknown, RuntimeToolParameters, string>;

/**
 * Wraps one SDK tool. The Agents SDK parses the model's arguments; the SDK
 * tool checks them and runs the call (with the run's abort signal), and the
 * model is given the result's text: a failed command (its exit code and
 * stderr), invalid arguments and a missing file are results. When Runtime
 * itself failed (the sandbox is gone, the server is unreachable) the model
 * is given errorResultFor(err)'s text; an aborted call rejects.
 */
export function toAgentsTool(t: SDKTool): RuntimeTool {
  return tool({
    name: t.name,
    description: t.description,
    parameters: t.inputSchema as RuntimeToolParameters,
    strict: true,
    async execute(input, _context, details) {
      const signal = details?.signal;
      try {
        return (await t.execute(input, signal ? { signal } : {})).text;
      } catch (err) {
        if (signal?.aborted) throw err;
        return errorResultFor(err).text;
      }
    },
  }) as RuntimeTool;
}

/** Wraps SDK tools (from sandboxTools or bindTools), in order. */
export function fromSDKTools(tools: SDKTool[]): RuntimeTool[] {
  return tools.map(toAgentsTool);
}

/**
 * The four tools bound to a sandbox, in the order runtime_exec,
 * runtime_read_file, runtime_write_file, runtime_list_files: a Sandbox, or a
 * function that returns the sandbox for each call (bindTools: to create one
 * on first use, or replace one whose lease ended).
 */
export function runtimeTools(sandbox: Sandbox | SandboxFunc): RuntimeTool[] {
  return fromSDKTools(typeof sandbox === "function" ? bindTools(sandbox) : sandboxTools(sandbox));
}

/** What runtime_run_code gives the model: the text, or the text then an image per chart. */
export type CodeToolOutput = string | Array<ToolOutputText | ToolOutputImage>;

/** runtime_run_code as an Agents SDK function tool. */
export type RuntimeCodeTool = FunctionTool<unknown, RuntimeToolParameters, CodeToolOutput>;

/**
 * Wraps the SDK's runtime_run_code as toAgentsTool does, except that a
 * result with images (charts) is given to the model as a list: a text
 * output, then an image output (base64 data and its media type) per image,
 * which the Agents SDK sends as input_text and input_image parts of the
 * function_call_output. The text names each image and its size.
 */
export function toAgentsCodeTool(t: SDKTool): RuntimeCodeTool {
  return tool({
    name: t.name,
    description: t.description,
    parameters: t.inputSchema as RuntimeToolParameters,
    strict: true,
    async execute(input, _context, details): Promise<CodeToolOutput> {
      const signal = details?.signal;
      try {
        const r = await t.execute(input, signal ? { signal } : {});
        const images = r.images ?? [];
        if (images.length === 0) return r.text;
        return [
          { type: "text", text: r.text },
          ...images.map((img): ToolOutputImage => ({ type: "image", image: { data: img.data, mediaType: img.mimeType } })),
        ];
      } catch (err) {
        if (signal?.aborted) throw err;
        return errorResultFor(err).text;
      }
    },
  }) as RuntimeCodeTool;
}

/**
 * The code interpreter's tool, runtime_run_code (Python in a Jupyter kernel
 * that keeps variables between calls), bound to a sandbox of the
 * "code-interpreter" template, or to a function that returns one for each
 * call, as a one-element list; add it to runtimeTools(sbx) as you like.
 */
export function codeInterpreterTools(sandbox: Sandbox | SandboxFunc): RuntimeCodeTool[] {
  return (typeof sandbox === "function" ? bindCodeInterpreter(sandbox) : sdkCodeInterpreterTools(sandbox)).map(toAgentsCodeTool);
}
