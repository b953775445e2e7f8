// The dispatch flow an application follows to give its model a
// code-execution tool: bind the four tools to a sandbox, declare them to the
// model, and run each tool call the model makes by name. Here the "model" is
// one hand-written tool call.
//
//   WITHRUNTIME_URL=http://127.0.0.1:7780 WITHRUNTIME_API_KEY=wr_... node dispatch.js
//
// prints a result with exit code 0 and stdout 42.
import { Sandbox } from "withruntime";
import { sandboxTools } from "withruntime/tools";

await using sbx = await Sandbox.create({ network: { internet: false }, timeoutSeconds: 1800 });
const tools = sandboxTools(sbx); // [{ name, description, inputSchema, execute }]: declare them to the model

// A tool call as the model's API returns it: a name and a JSON object of arguments.
const call = { id: "c1", name: "runtime_exec", arguments: '{"command":"python3 -c \\"print(6 * 7)\\""}' };

const tool = tools.find((t) => t.name === call.name);
if (!tool) throw new Error(`No tool named ${call.name}`);
const result = await tool.execute(JSON.parse(call.arguments));
console.log(result); // { text: "exit_code: 0\nstdout:\n42\n...", isError: false, data: { exitCode: 0, stdout: "42\n", ... } }
