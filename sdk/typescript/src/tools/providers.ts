// Each provider API's JSON shapes for declaring the tools and answering
// their calls (the same shapes, key for key, as the Go SDK's
// tools/providers.go; a test compares them with its golden files).

import type { CallOptions } from "../http.js";
import type { InputSchema } from "./definitions.js";
import { dispatch, type Tool, type ToolResult } from "./result.js";

type Declared = Pick<Tool, "name" | "description" | "inputSchema">;

/** One entry of an OpenAI Chat Completions request's "tools". strict is true: the schemas meet strict mode's rules. */
export interface OpenAIChatTool {
  type: "function";
  function: { name: string; description: string; parameters: InputSchema; strict: boolean };
}

/** One entry of an OpenAI Responses request's "tools". */
export interface OpenAIResponsesTool {
  type: "function";
  name: string;
  description: string;
  parameters: InputSchema;
  strict: boolean;
}

/** One entry of an Anthropic Messages request's "tools". */
export interface AnthropicTool {
  name: string;
  description: string;
  input_schema: InputSchema;
}

/** One entry of a Gemini request's tools[].functionDeclarations, with the schema as parametersJsonSchema. */
export interface GeminiFunctionDeclaration {
  name: string;
  description: string;
  parametersJsonSchema: InputSchema;
}

/** Declares tools for OpenAI Chat Completions. */
export function openAIChat(tools: Declared[]): OpenAIChatTool[] {
  return tools.map((t) => ({
    type: "function",
    function: { name: t.name, description: t.description, parameters: t.inputSchema, strict: true },
  }));
}

/** Declares tools for the OpenAI Responses API. */
export function openAIResponses(tools: Declared[]): OpenAIResponsesTool[] {
  return tools.map((t) => ({ type: "function", name: t.name, description: t.description, parameters: t.inputSchema, strict: true }));
}

/** Declares tools for Anthropic's Messages API. */
export function anthropic(tools: Declared[]): AnthropicTool[] {
  return tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.inputSchema }));
}

/** Declares tools for Gemini (one Tool's functionDeclarations). */
export function gemini(tools: Declared[]): GeminiFunctionDeclaration[] {
  return tools.map((t) => ({ name: t.name, description: t.description, parametersJsonSchema: t.inputSchema }));
}

/** The Chat Completions message that answers a tool call. The API has no error flag: an error result's text starts with "error: ". */
export interface OpenAIChatToolMessage {
  role: "tool";
  tool_call_id: string;
  content: string;
}

/** The Responses input item that answers a function call. */
export interface OpenAIResponsesOutput {
  type: "function_call_output";
  call_id: string;
  output: string;
}

/** The content block that answers a tool_use block. */
export interface AnthropicToolResult {
  type: "tool_result";
  tool_use_id: string;
  content: string;
  is_error?: boolean;
}

/** The part that answers a Gemini functionCall: response has an "output" key, or an "error" key for an error result. */
export interface GeminiFunctionResponse {
  functionResponse: { id?: string; name: string; response: { output: string } | { error: string } };
}

/** Answers the Chat Completions tool call callId with r. */
export function openAIChatResult(r: ToolResult, callId: string): OpenAIChatToolMessage {
  return { role: "tool", tool_call_id: callId, content: r.text };
}

/** Answers the Responses function call callId with r. */
export function openAIResponsesResult(r: ToolResult, callId: string): OpenAIResponsesOutput {
  return { type: "function_call_output", call_id: callId, output: r.text };
}

/** Answers the tool_use block toolUseId with r (is_error set for an error result). */
export function anthropicResult(r: ToolResult, toolUseId: string): AnthropicToolResult {
  const out: AnthropicToolResult = { type: "tool_result", tool_use_id: toolUseId, content: r.text };
  if (r.isError) out.is_error = true;
  return out;
}

/** Answers the functionCall of tool name (and id, if the call had one) with r. */
export function geminiResult(r: ToolResult, name: string, id?: string): GeminiFunctionResponse {
  return {
    functionResponse: {
      ...(id ? { id } : {}),
      name,
      response: r.isError ? { error: r.text } : { output: r.text },
    },
  };
}

/** One entry of a Chat Completions assistant message's "tool_calls"; function.arguments is a JSON object encoded as a string. */
export interface OpenAIChatToolCall {
  id: string;
  type?: string;
  function: { name: string; arguments: string };
}

/** A Responses output item of type "function_call"; arguments is a JSON object encoded as a string. */
export interface OpenAIResponsesFunctionCall {
  type?: string;
  id?: string;
  call_id: string;
  name: string;
  arguments: string;
}

/** A "tool_use" content block of a Messages answer; input is a JSON object. */
export interface AnthropicToolUse {
  type?: string;
  id: string;
  name: string;
  input: unknown;
}

/** The "functionCall" of a Gemini answer's part; args is a JSON object. */
export interface GeminiFunctionCall {
  id?: string;
  name: string;
  args?: unknown;
}

/** Runs a Chat Completions tool call and returns the "tool" message that answers it. */
export async function dispatchOpenAIChat(tools: Tool[], call: OpenAIChatToolCall, opts?: CallOptions): Promise<OpenAIChatToolMessage> {
  return openAIChatResult(await dispatch(tools, call.function.name, call.function.arguments, opts), call.id);
}

/** Runs a Responses function call and returns the function_call_output item that answers it. */
export async function dispatchOpenAIResponses(
  tools: Tool[],
  call: OpenAIResponsesFunctionCall,
  opts?: CallOptions,
): Promise<OpenAIResponsesOutput> {
  return openAIResponsesResult(await dispatch(tools, call.name, call.arguments, opts), call.call_id);
}

/** Runs a tool_use block and returns the tool_result block that answers it. */
export async function dispatchAnthropic(tools: Tool[], block: AnthropicToolUse, opts?: CallOptions): Promise<AnthropicToolResult> {
  return anthropicResult(await dispatch(tools, block.name, block.input, opts), block.id);
}

/** Runs a functionCall and returns the functionResponse part that answers it. */
export async function dispatchGemini(tools: Tool[], call: GeminiFunctionCall, opts?: CallOptions): Promise<GeminiFunctionResponse> {
  return geminiResult(await dispatch(tools, call.name, call.args, opts), call.name, call.id);
}
