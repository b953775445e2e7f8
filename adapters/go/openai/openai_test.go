package openai_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	runtimeopenai "withruntime.dev/runtime/adapters/go/openai"
	"withruntime.dev/runtime/adapters/go/testserver"
	withruntime "withruntime.dev/runtime/sdk/go"
	"withruntime.dev/runtime/sdk/go/tools"
)

func newSandbox(t *testing.T) (context.Context, []tools.Tool) {
	t.Helper()
	testserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	sbx, err := withruntime.Create(ctx, withruntime.Options{TimeoutSeconds: 300})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sbx.Close(); err != nil {
			t.Errorf("destroying the sandbox: %v", err)
		}
	})
	return ctx, tools.ForSandbox(sbx)
}

// jsonString encodes s as a JSON string literal (arguments arrive as a
// JSON object encoded in a string).
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

const (
	writeArgs = `{"path": "hello.py", "content": "print(6 * 7)\n"}`
	execArgs  = `{"command": "python3 hello.py", "cwd": "", "timeoutSeconds": 0}`
	failArgs  = `{"command": "echo oops >&2; exit 3", "cwd": "", "timeoutSeconds": 0}`
	readArgs  = `{"path": "no-such-file.txt"}`
)

// chatCompletion is a Chat Completions response body, as the API documents
// it, with one assistant message making the given tool calls.
func chatCompletion(t *testing.T, calls ...[3]string) openai.ChatCompletion {
	t.Helper()
	var tc []string
	for _, c := range calls {
		tc = append(tc, `{"id": "`+c[0]+`", "type": "function", "function": {"name": "`+c[1]+`", "arguments": `+jsonString(c[2])+`}}`)
	}
	body := `{"id": "chatcmpl-1", "object": "chat.completion", "created": 1741569952, "model": "gpt-4.1-2025-04-14",
		"choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": null, "annotations": [],
			"tool_calls": [` + strings.Join(tc, ",") + `]}, "logprobs": null, "finish_reason": "tool_calls"}],
		"usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99}, "service_tier": "default"}`
	var comp openai.ChatCompletion
	if err := json.Unmarshal([]byte(body), &comp); err != nil {
		t.Fatal(err)
	}
	return comp
}

type toolMessage struct {
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

func dispatchChat(t *testing.T, ctx context.Context, ts []tools.Tool, comp openai.ChatCompletion) []toolMessage {
	t.Helper()
	var out []toolMessage
	for _, call := range comp.Choices[0].Message.ToolCalls {
		msg, err := runtimeopenai.DispatchChat(ctx, ts, call)
		if err != nil {
			t.Fatalf("DispatchChat(%s): %v", call.ID, err)
		}
		b, err := json.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		var m toolMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		out = append(out, m)
	}
	return out
}

func TestChatCompletionsRunsPythonInSandbox(t *testing.T) {
	ctx, ts := newSandbox(t)
	msgs := dispatchChat(t, ctx, ts, chatCompletion(t,
		[3]string{"call_write", tools.WriteFileName, writeArgs},
		[3]string{"call_exec", tools.ExecName, execArgs}))
	if len(msgs) != 2 {
		t.Fatalf("%d tool messages, want 2", len(msgs))
	}
	if m := msgs[0]; m.Role != "tool" || m.ToolCallID != "call_write" || !strings.Contains(m.Content, "/workspace/hello.py") {
		t.Fatalf("write result: %+v", m)
	}
	m := msgs[1]
	if m.Role != "tool" || m.ToolCallID != "call_exec" || !strings.Contains(m.Content, "42") || !strings.Contains(m.Content, "exit_code: 0") {
		t.Fatalf("exec result: %+v", m)
	}
	t.Logf("tool message:\n%s", m.Content)
}

func TestChatCompletionsFailuresAreResults(t *testing.T) {
	ctx, ts := newSandbox(t)
	msgs := dispatchChat(t, ctx, ts, chatCompletion(t,
		[3]string{"call_fail", tools.ExecName, failArgs},
		[3]string{"call_read", tools.ReadFileName, readArgs},
		[3]string{"call_bad", tools.ExecName, `{"command": `}))
	// A command that exits non-zero is a result with its exit code.
	if m := msgs[0]; m.ToolCallID != "call_fail" || !strings.Contains(m.Content, "exit_code: 3") || !strings.Contains(m.Content, "oops") {
		t.Fatalf("failing command: %+v", m)
	}
	// A call that could not be carried out is plain content starting "error: ".
	for _, m := range msgs[1:] {
		if !strings.HasPrefix(m.Content, "error: ") {
			t.Fatalf("%s: %+v, want content starting with \"error: \"", m.ToolCallID, m)
		}
	}
}

func TestResponsesRunsPythonInSandbox(t *testing.T) {
	ctx, ts := newSandbox(t)
	item := func(callID, name, args string) string {
		return `{"type": "function_call", "id": "fc_` + callID + `", "call_id": "` + callID + `", "name": "` + name + `", "arguments": ` + jsonString(args) + `, "status": "completed"}`
	}
	body := `{"id": "resp_1", "object": "response", "created_at": 1741476777, "status": "completed", "model": "gpt-4.1-2025-04-14",
		"output": [` + item("call_write", tools.WriteFileName, writeArgs) + `, ` + item("call_exec", tools.ExecName, execArgs) + `, ` +
		item("call_fail", tools.ExecName, failArgs) + `, ` + item("call_read", tools.ReadFileName, readArgs) + `],
		"parallel_tool_calls": true, "tool_choice": "auto", "tools": [], "usage": {"input_tokens": 291, "output_tokens": 23, "total_tokens": 314}}`
	var resp responses.Response
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	type output struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
	var outs []output
	for _, it := range resp.Output {
		if it.Type != "function_call" {
			continue
		}
		in, err := runtimeopenai.DispatchResponses(ctx, ts, it.AsFunctionCall())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(in)
		var o output
		if err := json.Unmarshal(b, &o); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		outs = append(outs, o)
	}
	if len(outs) != 4 {
		t.Fatalf("%d outputs, want 4", len(outs))
	}
	for i, id := range []string{"call_write", "call_exec", "call_fail", "call_read"} {
		if outs[i].Type != "function_call_output" || outs[i].CallID != id {
			t.Fatalf("output %d: %+v", i, outs[i])
		}
	}
	if !strings.Contains(outs[1].Output, "42") || !strings.Contains(outs[1].Output, "exit_code: 0") {
		t.Fatalf("exec output: %+v", outs[1])
	}
	if !strings.Contains(outs[2].Output, "exit_code: 3") {
		t.Fatalf("failing command: %+v", outs[2])
	}
	if !strings.HasPrefix(outs[3].Output, "error: ") {
		t.Fatalf("missing file: %+v", outs[3])
	}
}

// The declarations carry the SDK's names, descriptions and schemas, strict.
func TestToolsMatchDefinitions(t *testing.T) {
	defs := tools.Definitions()
	chat, err := json.Marshal(runtimeopenai.ChatTools())
	if err != nil {
		t.Fatal(err)
	}
	var gotChat []tools.OpenAIChatTool
	if err := json.Unmarshal(chat, &gotChat); err != nil {
		t.Fatal(err)
	}
	resp, err := json.Marshal(runtimeopenai.ResponsesTools())
	if err != nil {
		t.Fatal(err)
	}
	var gotResp []tools.OpenAIResponsesTool
	if err := json.Unmarshal(resp, &gotResp); err != nil {
		t.Fatal(err)
	}
	if len(gotChat) != len(defs) || len(gotResp) != len(defs) {
		t.Fatalf("%d chat, %d responses tools, want %d", len(gotChat), len(gotResp), len(defs))
	}
	for i, d := range defs {
		c, r := gotChat[i], gotResp[i]
		if c.Type != "function" || c.Function.Name != d.Name || c.Function.Description != d.Description || !c.Function.Strict || !sameJSON(t, c.Function.Parameters, d.InputSchema) {
			t.Errorf("chat tool %d: %s", i, chat)
		}
		if r.Type != "function" || r.Name != d.Name || r.Description != d.Description || !r.Strict || !sameJSON(t, r.Parameters, d.InputSchema) {
			t.Errorf("responses tool %d: %s", i, resp)
		}
	}
}

func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}
