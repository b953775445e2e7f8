package anthropic_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	runtimeanthropic "withruntime.dev/runtime/adapters/go/anthropic"
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

// message is a Messages API response body, as the API documents it, with
// a text block and the given tool_use blocks ({id, name, input}).
func message(t *testing.T, blocks ...[3]string) anthropic.Message {
	t.Helper()
	content := []string{`{"type": "text", "text": "I'll do that."}`}
	for _, b := range blocks {
		content = append(content, `{"type": "tool_use", "id": "`+b[0]+`", "name": "`+b[1]+`", "input": `+b[2]+`}`)
	}
	body := `{"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
		"content": [` + strings.Join(content, ",") + `], "stop_reason": "tool_use", "stop_sequence": null,
		"usage": {"input_tokens": 2095, "output_tokens": 503}}`
	var msg anthropic.Message
	if err := json.Unmarshal([]byte(body), &msg); err != nil {
		t.Fatal(err)
	}
	return msg
}

type toolResult struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	IsError   bool   `json:"is_error"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func (r toolResult) text() string {
	var s []string
	for _, c := range r.Content {
		s = append(s, c.Text)
	}
	return strings.Join(s, "")
}

func dispatch(t *testing.T, ctx context.Context, ts []tools.Tool, msg anthropic.Message) []toolResult {
	t.Helper()
	var out []toolResult
	var params []anthropic.ContentBlockParamUnion
	for _, block := range msg.Content {
		if block.Type != "tool_use" {
			continue
		}
		res, err := runtimeanthropic.Dispatch(ctx, ts, block.AsToolUse())
		if err != nil {
			t.Fatalf("Dispatch(%s): %v", block.ID, err)
		}
		params = append(params, res)
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		var r toolResult
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		out = append(out, r)
	}
	// The results go back as the next user message.
	if _, err := json.Marshal(anthropic.NewUserMessage(params...)); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestToolUseRunsPythonInSandbox(t *testing.T) {
	ctx, ts := newSandbox(t)
	rs := dispatch(t, ctx, ts, message(t,
		[3]string{"toolu_write", tools.WriteFileName, `{"path": "hello.py", "content": "print(6 * 7)\n"}`},
		[3]string{"toolu_exec", tools.ExecName, `{"command": "python3 hello.py", "cwd": "", "timeoutSeconds": 0}`}))
	if len(rs) != 2 {
		t.Fatalf("%d results, want 2", len(rs))
	}
	if r := rs[0]; r.Type != "tool_result" || r.ToolUseID != "toolu_write" || r.IsError || !strings.Contains(r.text(), "/workspace/hello.py") {
		t.Fatalf("write result: %+v", r)
	}
	r := rs[1]
	if r.Type != "tool_result" || r.ToolUseID != "toolu_exec" || r.IsError || !strings.Contains(r.text(), "42") || !strings.Contains(r.text(), "exit_code: 0") {
		t.Fatalf("exec result: %+v", r)
	}
	t.Logf("tool_result:\n%s", r.text())
}

func TestFailuresAreResults(t *testing.T) {
	ctx, ts := newSandbox(t)
	rs := dispatch(t, ctx, ts, message(t,
		[3]string{"toolu_fail", tools.ExecName, `{"command": "echo oops >&2; exit 3", "cwd": "", "timeoutSeconds": 0}`},
		[3]string{"toolu_read", tools.ReadFileName, `{"path": "no-such-file.txt"}`},
		[3]string{"toolu_bad", tools.ExecName, `{"cmd": "ls"}`}))
	// A command that exits non-zero ran: its exit code is in the result.
	if r := rs[0]; r.ToolUseID != "toolu_fail" || r.IsError || !strings.Contains(r.text(), "exit_code: 3") || !strings.Contains(r.text(), "oops") {
		t.Fatalf("failing command: %+v", r)
	}
	// A call that could not be carried out is flagged is_error.
	for _, r := range rs[1:] {
		if !r.IsError || !strings.HasPrefix(r.text(), "error: ") {
			t.Fatalf("%s: %+v, want is_error", r.ToolUseID, r)
		}
	}
}

// The declarations carry the SDK's names, descriptions and whole schemas.
func TestToolsMatchDefinitions(t *testing.T) {
	b, err := json.Marshal(runtimeanthropic.Tools())
	if err != nil {
		t.Fatal(err)
	}
	var got []tools.AnthropicTool
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	defs := tools.Definitions()
	if len(got) != len(defs) {
		t.Fatalf("%d tools, want %d", len(got), len(defs))
	}
	for i, d := range defs {
		var x, y any
		json.Unmarshal(got[i].InputSchema, &x)
		json.Unmarshal(d.InputSchema, &y)
		xb, _ := json.Marshal(x)
		yb, _ := json.Marshal(y)
		if got[i].Name != d.Name || got[i].Description != d.Description || string(xb) != string(yb) {
			t.Errorf("tool %d:\n got %s\nwant %s", i, xb, yb)
		}
	}
}
