package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	withruntime "withruntime.dev/runtime/sdk/go"
)

func TestDecodeArgs(t *testing.T) {
	fields := specs[0].fields // runtime_exec: command (essential), cwd, timeoutSeconds
	ok := []struct {
		in      string
		command string
		cwd     string
		timeout int64
	}{
		{`{"command": "ls", "cwd": "", "timeoutSeconds": 0}`, "ls", "", 0},
		{`{"command": "python3 hello.py"}`, "python3 hello.py", "", 0},
		{`{"command": "ls", "cwd": "src", "timeoutSeconds": 30}`, "ls", "src", 30},
		{`{"command": "ls", "cwd": null, "timeoutSeconds": 30.0}`, "ls", "", 30},
		{`"{\"command\": \"ls\"}"`, "ls", "", 0}, // encoded twice
		{"  {\"command\": \"ls\"}\n", "ls", "", 0},
	}
	for _, c := range ok {
		a, err := decodeArgs(json.RawMessage(c.in), fields)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if a.str["command"] != c.command || a.str["cwd"] != c.cwd || a.num["timeoutSeconds"] != c.timeout {
			t.Errorf("%s: got %+v", c.in, a)
		}
	}
	bad := []struct{ in, want string }{
		{``, `missing "command"`},
		{`null`, `missing "command"`},
		{`{}`, `missing "command"`},
		{`{"command": null}`, `missing "command"`},
		{`{"command": 3}`, `"command" must be a string, not a number`},
		{`{"command": ["ls"]}`, `"command" must be a string, not an array`},
		{`{"command": "ls", "timeoutSeconds": "30"}`, `"timeoutSeconds" must be a whole number, not a string`},
		{`{"command": "ls", "timeoutSeconds": 1.5}`, `"timeoutSeconds" must be a whole number, not 1.5`},
		{`{"command": "ls", "timeout": 30}`, `unknown field "timeout"`},
		{`{"command": "ls"`, `one JSON object`},
		{`{"command": "ls"} {}`, `nothing after it`},
		{`[1, 2]`, `one JSON object`},
		{`{"command": "a\u0000b"}`, `NUL`},
		{`{"command": "` + strings.Repeat("x", MaxCommandBytes+1) + `"}`, `over the limit`},
	}
	for _, c := range bad {
		_, err := decodeArgs(json.RawMessage(c.in), fields)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.60s: error %v, want one containing %q", c.in, err, c.want)
		}
	}
}

// Invalid arguments never reach the sandbox: the SandboxFunc is not called
// and the model gets an error Result that shows the expected arguments.
func TestInvalidArgumentsAreResults(t *testing.T) {
	ts := Bind(func(context.Context) (*withruntime.Sandbox, error) {
		t.Fatal("the sandbox was asked for despite invalid arguments")
		return nil, nil
	})
	for _, c := range []struct{ tool, args, want string }{
		{ExecName, `{"cwd": ""}`, `missing "command"`},
		{ReadFileName, `{"path": 7}`, `"path" must be a string`},
		{WriteFileName, `{"path": "a.txt"}`, `missing "content"`},
		{ListFilesName, `{"path": "", "depth": 2}`, `unknown field "depth"`},
		{ExecName, `not json`, `one JSON object`},
	} {
		res, err := Dispatch(context.Background(), ts, c.tool, json.RawMessage(c.args))
		if err != nil || !res.IsError || !strings.Contains(res.Text, c.want) || !strings.Contains(res.Text, "Expected arguments: {") {
			t.Errorf("%s %s: %+v, %v", c.tool, c.args, res, err)
		}
	}
	res, err := Dispatch(context.Background(), ts, "runtime_nope", nil)
	if err != nil || !res.IsError || !strings.Contains(res.Text, "runtime_exec, runtime_read_file") {
		t.Errorf("unknown tool: %+v, %v", res, err)
	}
	// Values the schema allows but the tool refuses are checked before the
	// sandbox is asked for too.
	for _, c := range []struct{ tool, args, want string }{
		{ExecName, `{"command": "  "}`, `"command" is empty`},
		{ExecName, `{"command": "ls", "timeoutSeconds": -1}`, `"timeoutSeconds" is -1`},
		{ExecName, `{"command": "ls", "timeoutSeconds": 100000}`, `up to 1800`},
		{ReadFileName, `{"path": ""}`, `"path" is empty`},
		{WriteFileName, `{"path": "", "content": "x"}`, `"path" is empty`},
		{WriteFileName, `{"path": "/workspace/..//workspace", "content": "x"}`, `is a directory`},
	} {
		res, err := Dispatch(context.Background(), ts, c.tool, json.RawMessage(c.args))
		if err != nil || !res.IsError || !strings.Contains(res.Text, c.want) {
			t.Errorf("%s %s: %+v, %v", c.tool, c.args, res, err)
		}
	}
}

func TestResolve(t *testing.T) {
	for in, want := range map[string]string{
		"hello.py":             "/workspace/hello.py",
		"./a/../b.txt":         "/workspace/b.txt",
		"../../../../etc/pass": "/etc/pass",
		"/tmp//x/":             "/tmp/x",
		"..":                   "/",
	} {
		if got := resolve(in); got != want {
			t.Errorf("resolve(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCapBuf(t *testing.T) {
	// Small output is kept whole.
	c := newCapBuf(16)
	c.Write([]byte("hello"))
	if s, cut := c.Text("stdout"); s != "hello" || cut != 0 {
		t.Fatalf("small: %q %d", s, cut)
	}
	// Exactly the limit is kept whole.
	c = newCapBuf(16)
	c.Write([]byte("0123456789abcdef"))
	if s, cut := c.Text("stdout"); s != "0123456789abcdef" || cut != 0 {
		t.Fatalf("at limit: %q %d", s, cut)
	}
	// Large output written in pieces keeps head and tail and counts the cut.
	for _, chunk := range []int{1, 3, 7, 1000, 100000} {
		const limit = 1000
		var all strings.Builder
		for i := 0; all.Len() < 50000; i++ {
			all.WriteString("line " + strings.Repeat("é", i%5) + "€\n")
		}
		data := all.String()
		c := newCapBuf(limit)
		for i := 0; i < len(data); i += chunk {
			c.Write([]byte(data[i:min(i+chunk, len(data))]))
		}
		head, tail, cut := c.Parts()
		if !utf8.Valid(head) || !utf8.Valid(tail) {
			t.Fatalf("chunk %d: cut inside a UTF-8 sequence", chunk)
		}
		if len(head) > limit/2 || len(tail) > limit/2 || len(head) < limit/2-4 || len(tail) < limit/2-4 {
			t.Fatalf("chunk %d: head %d, tail %d bytes", chunk, len(head), len(tail))
		}
		if !strings.HasPrefix(data, string(head)) || !strings.HasSuffix(data, string(tail)) {
			t.Fatalf("chunk %d: head or tail is not the data's", chunk)
		}
		if int64(len(head))+int64(len(tail))+cut != int64(len(data)) || c.Total() != int64(len(data)) {
			t.Fatalf("chunk %d: %d + %d + %d != %d", chunk, len(head), len(tail), cut, len(data))
		}
		text, _ := c.Text("stdout")
		if !strings.Contains(text, "bytes cut from the middle of stdout") {
			t.Fatalf("no marker: %q", text)
		}
	}
}

func TestProviderResults(t *testing.T) {
	ok := Result{Text: "exit_code: 0"}
	bad := Result{Text: "error: no", IsError: true}
	for _, c := range []struct {
		got  any
		want string
	}{
		{ok.OpenAIChatResult("call_1"), `{"role":"tool","tool_call_id":"call_1","content":"exit_code: 0"}`},
		{ok.OpenAIResponsesResult("call_1"), `{"type":"function_call_output","call_id":"call_1","output":"exit_code: 0"}`},
		{bad.AnthropicResult("toolu_1"), `{"type":"tool_result","tool_use_id":"toolu_1","content":"error: no","is_error":true}`},
		{ok.AnthropicResult("toolu_1"), `{"type":"tool_result","tool_use_id":"toolu_1","content":"exit_code: 0"}`},
		{bad.GeminiResult("runtime_exec", ""), `{"functionResponse":{"name":"runtime_exec","response":{"error":"error: no"}}}`},
		{ok.GeminiResult("runtime_exec", "c1"), `{"functionResponse":{"id":"c1","name":"runtime_exec","response":{"output":"exit_code: 0"}}}`},
	} {
		b, _ := json.Marshal(c.got)
		if string(b) != c.want {
			t.Errorf("got  %s\nwant %s", b, c.want)
		}
	}
}

// Tool calls shaped exactly as each API returns them decode into the call
// types and come back as each API's result, errors flagged its way.
func TestProviderCallShapes(t *testing.T) {
	ts := Bind(func(context.Context) (*withruntime.Sandbox, error) {
		t.Fatal("the sandbox was asked for despite invalid arguments")
		return nil, nil
	})
	ctx := context.Background()

	var chat struct {
		Choices []struct {
			Message struct {
				ToolCalls []OpenAIChatToolCall `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	mustUnmarshal(t, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,
		"tool_calls":[{"id":"call_1","type":"function","function":{"name":"runtime_exec","arguments":"{\"cwd\":\"\"}"}}]},"finish_reason":"tool_calls"}]}`, &chat)
	msg, err := DispatchOpenAIChat(ctx, ts, chat.Choices[0].Message.ToolCalls[0])
	if err != nil || msg.Role != "tool" || msg.ToolCallID != "call_1" || !strings.Contains(msg.Content, `missing "command"`) {
		t.Errorf("chat: %+v %v", msg, err)
	}

	var resp struct {
		Output []OpenAIResponsesFunctionCall `json:"output"`
	}
	mustUnmarshal(t, `{"id":"resp_1","output":[{"type":"function_call","id":"fc_1","call_id":"call_2","name":"runtime_read_file","arguments":"{\"path\":\"\"}","status":"completed"}]}`, &resp)
	out, err := DispatchOpenAIResponses(ctx, ts, resp.Output[0])
	if err != nil || out.Type != "function_call_output" || out.CallID != "call_2" || !strings.Contains(out.Output, `"path" is empty`) {
		t.Errorf("responses: %+v %v", out, err)
	}

	var msgs struct {
		Content []AnthropicToolUse `json:"content"`
	}
	mustUnmarshal(t, `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"runtime_write_file","input":{"path":"a.txt"}}],"stop_reason":"tool_use"}`, &msgs)
	tr, err := DispatchAnthropic(ctx, ts, msgs.Content[0])
	if err != nil || tr.Type != "tool_result" || tr.ToolUseID != "toolu_1" || !tr.IsError || !strings.Contains(tr.Content, `missing "content"`) {
		t.Errorf("anthropic: %+v %v", tr, err)
	}

	var gem struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					FunctionCall *GeminiFunctionCall `json:"functionCall"`
				} `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	mustUnmarshal(t, `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"runtime_list_files","args":{"path":3}}}]}}]}`, &gem)
	fr, err := DispatchGemini(ctx, ts, *gem.Candidates[0].Content.Parts[0].FunctionCall)
	if e, ok := fr.FunctionResponse.Response["error"].(string); err != nil || fr.FunctionResponse.Name != "runtime_list_files" || !ok || !strings.Contains(e, `"path" must be a string`) {
		t.Errorf("gemini: %+v %v", fr, err)
	}
}

func mustUnmarshal(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatal(err)
	}
}
