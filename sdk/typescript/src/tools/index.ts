/**
 * withruntime/tools: a code-execution tool for a language model. Four tools
 * bound to one Runtime sandbox, each with a name, a description written for
 * the model, a JSON Schema for its arguments (the Go SDK's, byte for byte),
 * and an execute function.
 *
 * ```ts
 * const tools = sandboxTools(sbx);
 * // declare them to the model (name, description, inputSchema; or see
 * // openAIChat, anthropic, gemini), then for each tool call it makes:
 * const tool = tools.find((t) => t.name === call.name);
 * const result = await tool.execute(JSON.parse(call.arguments));
 * // give result.text back to the model
 * ```
 *
 * A command that fails and invalid arguments are results (isError set for
 * the latter), never exceptions: execute throws only when Runtime itself
 * failed (the sandbox is gone: LeaseEndedError, SandboxStoppedError; the
 * server is unreachable; the signal aborted). errorResultFor(err) is then
 * the result to give the model.
 *
 * @module
 */
export { definitions, TOOL_NAMES, type Definition, type InputSchema, type ToolName } from "./definitions.js";
export {
  dispatch,
  errorResultFor,
  findTool,
  type ExecOutput,
  type ImageOutput,
  type ListOutput,
  type ReadOutput,
  type SandboxFunc,
  type Tool,
  type ToolResult,
  type WriteOutput,
} from "./result.js";
export {
  bindTools,
  resolvePath,
  sandboxTools,
  DEFAULT_TIMEOUT_SECONDS,
  EXEC_NAME,
  LIST_FILES_NAME,
  MAX_COMMAND_BYTES,
  MAX_CONTENT_BYTES,
  MAX_LIST_ENTRIES,
  MAX_OUTPUT_BYTES,
  MAX_PATH_BYTES,
  MAX_READ_BINARY_BYTES,
  MAX_READ_BYTES,
  MAX_READ_SCAN_BYTES,
  MAX_TIMEOUT_SECONDS,
  READ_FILE_NAME,
  WRITE_FILE_NAME,
} from "./sandbox.js";
export * from "./providers.js";
export {
  anthropicToolResult,
  bindCodeInterpreter,
  codeDefinitions,
  codeInterpreterTools,
  geminiParts,
  openAIResponsesOutput,
  summarizeExecution,
  CODE_TIMEOUT_SECONDS,
  MAX_CODE_BYTES,
  MAX_IMAGE_BYTES,
  MAX_IMAGES,
  MAX_RESULT_TEXT_BYTES,
  RUN_CODE_NAME,
} from "./code.js";
