// Command dispatch shows the flow an application follows to give its model
// a code-execution tool: bind the four tools to a sandbox, declare them to
// the model, and dispatch each tool call the model makes by name.
//
// Here the "model" is two hand-written tool calls: write hello.py, then run
// it. Run it against a Runtime server:
//
//	WITHRUNTIME_URL=http://127.0.0.1:7780 WITHRUNTIME_API_KEY=wr_... go run ./dispatch   (from examples/)
//
// It prints the four tool names, then exit code 0 and 42.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	withruntime "withruntime.dev/runtime/sdk/go"
	"withruntime.dev/runtime/sdk/go/tools"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "dispatch:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	sbx, err := withruntime.Create(ctx, withruntime.Options{TimeoutSeconds: 120})
	if err != nil {
		return err
	}
	defer sbx.Close()

	ts := tools.ForSandbox(sbx)
	// Declare the tools to the model, for example as OpenAI Chat Completions
	// "tools": json.Marshal(tools.OpenAIChat(ts)). Here we print their names.
	for _, t := range ts {
		fmt.Println(t.Name)
	}

	// The tool calls a model would make, as its API returns them: a name
	// and a JSON object of arguments.
	calls := []struct {
		name string
		args json.RawMessage
	}{
		{"runtime_write_file", json.RawMessage(`{"path": "hello.py", "content": "print(6 * 7)\n"}`)},
		{"runtime_exec", json.RawMessage(`{"command": "python3 hello.py", "cwd": "", "timeoutSeconds": 0}`)},
	}
	for _, call := range calls {
		res, err := tools.Dispatch(ctx, ts, call.name, call.args)
		if err != nil {
			return err // Runtime itself failed; res.Text still tells the model
		}
		// res.Text is what goes back to the model (see Result.AnthropicResult,
		// OpenAIChatResult, GeminiResult for each API's shape).
		if out, ok := res.Data.(*tools.ExecOutput); ok {
			fmt.Printf("exit code %d\n%s", out.ExitCode, out.Stdout)
		}
	}
	return nil
}
