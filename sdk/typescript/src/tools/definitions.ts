import { readFileSync } from "node:fs";

/** A tool's JSON Schema: a flat object whose properties are all required. */
export type InputSchema = {
  type: "object";
  properties: Record<string, { type: "string" | "integer"; description: string }>;
  required: string[];
  additionalProperties: false;
};

/** A tool's declaration without a sandbox: enough to tell a model about the tools before any sandbox exists. */
export type Definition = {
  name: string;
  description: string;
  inputSchema: InputSchema;
};

/** The tool names, in the order the tools come. */
export const TOOL_NAMES = ["runtime_exec", "runtime_read_file", "runtime_write_file", "runtime_list_files"] as const;

/** One of the tool names. */
export type ToolName = (typeof TOOL_NAMES)[number];

/**
 * The package's copies of the canonical definitions, the Go SDK's
 * tools/testdata/runtime_*.golden files (a test checks they are identical).
 */
export function definitionFile(name: ToolName): URL {
  return new URL(`../../definitions/${name}.json`, import.meta.url);
}

function load(name: ToolName): Definition {
  const d = JSON.parse(readFileSync(definitionFile(name), "utf8")) as Definition;
  if (d.name !== name) throw new Error(`withruntime: ${definitionFile(name).pathname} defines ${d.name}, not ${name}`);
  return d;
}

const loaded: Record<ToolName, Definition> = {
  runtime_exec: load("runtime_exec"),
  runtime_read_file: load("runtime_read_file"),
  runtime_write_file: load("runtime_write_file"),
  runtime_list_files: load("runtime_list_files"),
};

/** A deep copy, so that a caller changing a definition changes nothing here. */
export function definitionOf(name: ToolName): Definition {
  return structuredClone(loaded[name]);
}

/** The four tools' declarations, in the order runtime_exec, runtime_read_file, runtime_write_file, runtime_list_files. */
export function definitions(): Definition[] {
  return TOOL_NAMES.map(definitionOf);
}
