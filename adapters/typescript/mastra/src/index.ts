/**
 * withruntime-mastra: Runtime's four sandbox tools (runtime_exec,
 * runtime_read_file, runtime_write_file, runtime_list_files) as Mastra
 * tools (createTool from @mastra/core/tools). A thin wrapper over
 * withruntime/tools: names, descriptions, argument checks, output caps and
 * result text all come from the SDK. Mastra's createTool takes a Zod schema,
 * so the SDK's JSON Schema is handed over as zod's z.fromJSONSchema of it;
 * Mastra turns it back into JSON Schema for the model.
 *
 * ```ts
 * import { Agent } from "@mastra/core/agent";
 * import { Sandbox } from "withruntime";
 * import { runtimeTools } from "withruntime-mastra";
 *
 * await using sbx = await Sandbox.create({ timeoutSeconds: 600 });
 * const agent = new Agent({ name: "coder", instructions: "...", model, tools: runtimeTools(sbx) });
 * const result = await agent.generate("Write hello.py that prints 6 * 7 and run it.");
 * ```
 *
 * @module
 */
import { createTool, type Tool } from "@mastra/core/tools";
import type { Sandbox } from "withruntime";
import { bindTools, errorResultFor, sandboxTools, type SandboxFunc, type Tool as SDKTool, type ToolName } from "withruntime/tools";
import { z } from "zod";

/** The input schema of a Runtime tool: zod's reading of the SDK's JSON Schema. */
export type RuntimeToolInput = z.ZodType<Record<string, unknown>>;

/** One Runtime tool as a Mastra tool; its output (what the model is given) is the SDK result's text. */
export type RuntimeTool = Tool<RuntimeToolInput, undefined>;

/** The four tools by name, for an Agent's `tools`. */
export type RuntimeToolSet = Record<ToolName, RuntimeTool>;

/**
 * Wraps one SDK tool; its id is the tool's name. The SDK tool checks the
 * model's arguments and runs the call with the call's abort signal, and the
 * model is given the result's text: a failed command (its exit code and
 * stderr), invalid arguments and a missing file are results. When Runtime
 * itself failed (the sandbox is gone, the server is unreachable) the model
 * is given errorResultFor(err)'s text; an aborted call rejects.
 */
export function toMastraTool(t: SDKTool): RuntimeTool {
  return createTool({
    id: t.name,
    description: t.description,
    inputSchema: z.fromJSONSchema(t.inputSchema) as RuntimeToolInput,
    async execute({ context }, options) {
      const signal = options?.abortSignal;
      try {
        return (await t.execute(context, signal ? { signal } : {})).text;
      } catch (err) {
        if (signal?.aborted) throw err;
        return errorResultFor(err).text;
      }
    },
  });
}

/** Wraps SDK tools (from sandboxTools or bindTools), keyed by name. */
export function fromSDKTools(tools: SDKTool[]): Record<string, RuntimeTool> {
  return Object.fromEntries(tools.map((t) => [t.name, toMastraTool(t)]));
}

/**
 * The four tools bound to a sandbox: a Sandbox, or a function that returns
 * the sandbox for each call (bindTools: to create one on first use, or
 * replace one whose lease ended).
 */
export function runtimeTools(sandbox: Sandbox | SandboxFunc): RuntimeToolSet {
  return fromSDKTools(typeof sandbox === "function" ? bindTools(sandbox) : sandboxTools(sandbox)) as RuntimeToolSet;
}
