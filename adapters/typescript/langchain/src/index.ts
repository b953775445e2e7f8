/**
 * withruntime-langchain: Runtime's four sandbox tools (runtime_exec,
 * runtime_read_file, runtime_write_file, runtime_list_files) as LangChain.js
 * structured tools (DynamicStructuredTool, made with `tool()` from
 * @langchain/core/tools), for createAgent (langchain), createReactAgent
 * (@langchain/langgraph/prebuilt), a ToolNode or model.bindTools. A thin
 * wrapper over withruntime/tools: names, descriptions, JSON Schemas (given
 * to LangChain unchanged), argument checks, output caps and result text all
 * come from the SDK.
 *
 * ```ts
 * import { createAgent } from "langchain";
 * import { Sandbox } from "withruntime";
 * import { runtimeTools } from "withruntime-langchain";
 *
 * await using sbx = await Sandbox.create({ timeoutSeconds: 600 });
 * const agent = createAgent({ model, tools: runtimeTools(sbx) });
 * const state = await agent.invoke({ messages: [{ role: "user", content: "Write hello.py that prints 6 * 7 and run it." }] });
 * ```
 *
 * @module
 */
import { tool, type DynamicStructuredTool } from "@langchain/core/tools";
import type { JSONSchema } from "@langchain/core/utils/json_schema";
import type { Sandbox } from "withruntime";
import type { MessageContent } from "@langchain/core/messages";
import {
  bindCodeInterpreter,
  bindTools,
  codeInterpreterTools as sdkCodeInterpreterTools,
  errorResultFor,
  sandboxTools,
  type SandboxFunc,
  type Tool as SDKTool,
  type ToolResult,
} from "withruntime/tools";

/**
 * One Runtime tool as a LangChain structured tool. Its response format is
 * "content_and_artifact": the ToolMessage's content is the SDK result's text
 * (what the model sees), its artifact the whole ToolResult (text, isError,
 * data) for programs.
 */
export type RuntimeTool = DynamicStructuredTool<JSONSchema, Record<string, unknown>, Record<string, unknown>, [string, ToolResult]>;

/**
 * Wraps one SDK tool. The SDK tool checks the model's arguments and runs the
 * call with the run's abort signal: a failed command (its exit code and
 * stderr), invalid arguments and a missing file are results for the model.
 * When Runtime itself failed (the sandbox is gone, the server is
 * unreachable) the model is given errorResultFor(err); an aborted call
 * rejects.
 */
export function toLangChainTool(t: SDKTool): RuntimeTool {
  return tool(
    async (input: Record<string, unknown>, config): Promise<[string, ToolResult]> => {
      const signal = config?.signal;
      let r: ToolResult;
      try {
        r = await t.execute(input, signal ? { signal } : {});
      } catch (err) {
        if (signal?.aborted) throw err;
        r = errorResultFor(err);
      }
      return [r.text, r];
    },
    {
      name: t.name,
      description: t.description,
      schema: t.inputSchema as JSONSchema,
      responseFormat: "content_and_artifact",
    },
  ) as RuntimeTool;
}

/** Wraps SDK tools (from sandboxTools or bindTools), in order. */
export function fromSDKTools(tools: SDKTool[]): RuntimeTool[] {
  return tools.map(toLangChainTool);
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

/** runtime_run_code as a LangChain structured tool: its content is the text, or standard content blocks when it has images. */
export type RuntimeCodeTool = DynamicStructuredTool<JSONSchema, Record<string, unknown>, Record<string, unknown>, [MessageContent, ToolResult]>;

/**
 * Wraps the SDK's runtime_run_code as toLangChainTool does, except that a
 * result with images (charts) is a ToolMessage whose content is a list of
 * standard content blocks: a "text" block, then an "image" block (base64
 * data, mimeType) per image, which chat models that take images in tool
 * results translate to their provider's shape. The text names each image and
 * its size; the artifact is the whole ToolResult, images included.
 */
export function toLangChainCodeTool(t: SDKTool): RuntimeCodeTool {
  return tool(
    async (input: Record<string, unknown>, config): Promise<[MessageContent, ToolResult]> => {
      const signal = config?.signal;
      let r: ToolResult;
      try {
        r = await t.execute(input, signal ? { signal } : {});
      } catch (err) {
        if (signal?.aborted) throw err;
        r = errorResultFor(err);
      }
      const images = r.images ?? [];
      if (images.length === 0) return [r.text, r];
      return [[{ type: "text", text: r.text }, ...images.map((img) => ({ type: "image" as const, data: img.data, mimeType: img.mimeType }))], r];
    },
    {
      name: t.name,
      description: t.description,
      schema: t.inputSchema as JSONSchema,
      responseFormat: "content_and_artifact",
    },
  ) as RuntimeCodeTool;
}

/**
 * The code interpreter's tool, runtime_run_code (Python in a Jupyter kernel
 * that keeps variables between calls), bound to a sandbox of the
 * "code-interpreter" template, or to a function that returns one for each
 * call, as a one-element list; add it to runtimeTools(sbx) as you like.
 */
export function codeInterpreterTools(sandbox: Sandbox | SandboxFunc): RuntimeCodeTool[] {
  return (typeof sandbox === "function" ? bindCodeInterpreter(sandbox) : sdkCodeInterpreterTools(sandbox)).map(toLangChainCodeTool);
}
