package itest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	withruntime "withruntime.dev/runtime/sdk/go"
	"withruntime.dev/runtime/sdk/go/tools"
)

// sdkClient is an SDK client for the test's server.
func (e *env) sdkClient() *withruntime.Client {
	e.t.Helper()
	c, err := withruntime.NewClient(withruntime.WithBaseURL(e.http.URL), withruntime.WithAPIKey(e.key))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func TestSDKSandbox(t *testing.T) {
	e := newEnv(t)
	c := e.sdkClient()
	ctx := context.Background()

	sbx, err := c.Create(ctx, withruntime.Options{TimeoutSeconds: 120, Env: map[string]string{"GREETING": "hi"},
		Metadata: map[string]string{"suite": "sdk"}})
	if err != nil {
		t.Fatal(err)
	}
	if info := sbx.Info(); info.State != "running" || info.Metadata["suite"] != "sdk" || sbx.ID() == "" {
		t.Fatalf("created: %+v", info)
	}
	list, err := c.List(ctx, withruntime.ListFilter{State: "running", Metadata: map[string]string{"suite": "sdk"}})
	if err != nil || len(list) != 1 || list[0].ID != sbx.ID() {
		t.Fatalf("list: %+v %v", list, err)
	}
	same, err := c.Connect(ctx, sbx.ID())
	if err != nil || same.ID() != sbx.ID() {
		t.Fatalf("connect: %v", err)
	}

	// Exec: a result, and a failing command that is a result too.
	res, err := sbx.Exec(ctx, withruntime.ExecRequest{Argv: []string{"python3", "-c", "print(6*7)"}})
	if err != nil || res.ExitCode != 0 || res.Stdout != "42\n" {
		t.Fatalf("python3: %+v %v", res, err)
	}
	res, err = sbx.Run(ctx, `echo "$GREETING"; echo oops >&2; exit 3`)
	if err != nil || res.ExitCode != 3 || res.Stdout != "hi\n" || res.Stderr != "oops\n" {
		t.Fatalf("failing command: %+v %v", res, err)
	}
	if _, err := sbx.Exec(ctx, withruntime.ExecRequest{Command: "true", Cwd: "/nonexistent"}); !errors.Is(err, withruntime.ErrBadRequest) {
		t.Fatalf("bad cwd: %v", err)
	}

	// ExecStream yields start, output, exit in order; ExecTo copies exact bytes.
	var types []string
	var streamed bytes.Buffer
	for ev, err := range sbx.ExecStream(ctx, withruntime.ExecRequest{Command: "for i in 1 2 3; do echo $i; sleep 0.1; done; exit 5"}) {
		if err != nil {
			t.Fatal(err)
		}
		if len(types) == 0 || types[len(types)-1] != ev.Type {
			types = append(types, ev.Type)
		}
		if ev.Type == "stdout" {
			streamed.Write(ev.Bytes())
		}
		if ev.Type == "exit" && ev.Result.ExitCode != 5 {
			t.Fatalf("stream exit: %+v", ev.Result)
		}
	}
	if strings.Join(types, ",") != "start,stdout,exit" || streamed.String() != "1\n2\n3\n" {
		t.Fatalf("stream: %v %q", types, streamed.String())
	}
	var out, errb bytes.Buffer
	res, err = sbx.ExecTo(ctx, withruntime.ExecRequest{Command: `printf 'a\377b'; printf e >&2`}, &out, &errb)
	if err != nil || res.ExitCode != 0 || out.String() != "a\xffb" || errb.String() != "e" {
		t.Fatalf("ExecTo: %+v %v %q %q", res, err, out.String(), errb.String())
	}

	// Files, streamed both ways.
	f := sbx.Files()
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	fi, err := f.Write(ctx, "data/big.bin", io.MultiReader(bytes.NewReader(big[:1000]), bytes.NewReader(big[1000:])))
	if err != nil || fi.Size != int64(len(big)) || fi.Path != "/workspace/data/big.bin" || fi.Type != "file" {
		t.Fatalf("write: %+v %v", fi, err)
	}
	var got bytes.Buffer
	if n, err := f.Read(ctx, "/workspace/data/big.bin", &got); err != nil || n != int64(len(big)) || !bytes.Equal(got.Bytes(), big) {
		t.Fatalf("read back: %d %v", n, err)
	}
	if _, err := f.WriteFile(ctx, "hello.txt", []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := f.ReadFile(ctx, "hello.txt"); err != nil || string(b) != "hello\n" {
		t.Fatalf("ReadFile: %q %v", b, err)
	}
	if fi, err := f.Stat(ctx, "hello.txt"); err != nil || fi.Size != 6 || fi.Mode != "0644" {
		t.Fatalf("stat: %+v %v", fi, err)
	}
	if _, err := f.Mkdir(ctx, "a/b"); !errors.Is(err, withruntime.ErrNotFound) {
		t.Fatalf("mkdir without parent: %v", err)
	}
	if fi, err := f.MkdirAll(ctx, "a/b"); err != nil || fi.Type != "dir" {
		t.Fatalf("MkdirAll: %+v %v", fi, err)
	}
	if fi, err := f.Rename(ctx, "hello.txt", "a/b/hi.txt"); err != nil || fi.Path != "/workspace/a/b/hi.txt" {
		t.Fatalf("rename: %+v %v", fi, err)
	}
	entries, err := f.List(ctx, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, en := range entries {
		paths = append(paths, en.Path)
	}
	if strings.Join(paths, " ") != "/workspace/a /workspace/a/b /workspace/a/b/hi.txt /workspace/data /workspace/data/big.bin" {
		t.Fatalf("list: %v", paths)
	}
	if err := f.Remove(ctx, "a"); !errors.Is(err, withruntime.ErrConflict) {
		t.Fatalf("remove non-empty dir: %v", err)
	}
	if err := f.RemoveAll(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove(ctx, "data/big.bin"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stat(ctx, "a"); !errors.Is(err, withruntime.ErrNotFound) {
		t.Fatalf("stat removed: %v", err)
	}
	if _, err := f.ReadFile(ctx, "missing.txt"); !errors.Is(err, withruntime.ErrNotFound) {
		t.Fatalf("read missing: %v", err)
	}

	// SetTimeout moves the lease end.
	if err := sbx.SetTimeout(ctx, 3600); err != nil {
		t.Fatal(err)
	}
	if d := time.Until(sbx.Info().LeaseEndsAt); d < 59*time.Minute {
		t.Fatalf("lease after SetTimeout(3600): %s left", d)
	}
	if err := sbx.SetTimeout(ctx, 0); !errors.Is(err, withruntime.ErrBadRequest) {
		t.Fatalf("SetTimeout(0): %v", err)
	}

	// Close twice; then the sandbox is gone, with typed errors.
	if err := sbx.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sbx.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := same.Close(); err != nil {
		t.Fatalf("close through another handle: %v", err)
	}
	if _, err := sbx.Run(ctx, "true"); !errors.Is(err, withruntime.ErrSandboxStopped) {
		t.Fatalf("exec after close: %v", err)
	}
	if _, err := c.Connect(ctx, sbx.ID()); !errors.Is(err, withruntime.ErrSandboxStopped) {
		t.Fatalf("connect after close: %v", err)
	}
	var ae *withruntime.APIError
	if _, err := c.Connect(ctx, "sb_nope"); !errors.Is(err, withruntime.ErrNotFound) || !errors.As(err, &ae) || ae.Status != 404 || ae.Message == "" {
		t.Fatalf("connect to unknown: %v", err)
	}
	bad, _ := withruntime.NewClient(withruntime.WithBaseURL(e.http.URL), withruntime.WithAPIKey("wr_wrong"))
	if _, err := bad.List(ctx, withruntime.ListFilter{}); !errors.Is(err, withruntime.ErrUnauthorized) {
		t.Fatalf("wrong key: %v", err)
	}
	if _, err := c.Create(ctx, withruntime.Options{Template: "no-such-template"}); err == nil {
		t.Fatal("create with an unknown template succeeded")
	}

	// A lease that ends: ErrLeaseEnded, and Close still succeeds.
	short, err := c.Create(ctx, withruntime.Options{TimeoutSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the lease to end", func() bool {
		_, err := short.Run(ctx, "true")
		return errors.Is(err, withruntime.ErrLeaseEnded)
	})
	if _, err := c.Connect(ctx, short.ID()); !errors.Is(err, withruntime.ErrLeaseEnded) {
		t.Fatalf("connect after lease end: %v", err)
	}
	if err := short.Close(); err != nil {
		t.Fatalf("close after lease end: %v", err)
	}
}

// sdkCall dispatches a tool call and fails the test on a Go error.
func sdkCall(t *testing.T, ts []tools.Tool, name, args string) tools.Result {
	t.Helper()
	res, err := tools.Dispatch(context.Background(), ts, name, json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s %s: error %v (result %+v)", name, args, err, res)
	}
	return res
}

func TestToolsAgainstSandbox(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sbx, err := e.sdkClient().Create(ctx, withruntime.Options{TimeoutSeconds: 300})
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Close()
	ts := tools.ForSandbox(sbx)

	// The dispatch flow: write hello.py, run it.
	res := sdkCall(t, ts, "runtime_write_file", `{"path": "hello.py", "content": "print(6 * 7)\n"}`)
	if res.IsError || res.Text != "wrote 13 bytes to /workspace/hello.py" {
		t.Fatalf("write: %+v", res)
	}
	res = sdkCall(t, ts, "runtime_exec", `{"command": "python3 hello.py"}`) // sentinels left out
	if res.IsError || res.Text != "exit_code: 0\nstdout:\n42\nstderr: (empty)" {
		t.Fatalf("exec: %q", res.Text)
	}
	if out := res.Data.(*tools.ExecOutput); out.ExitCode != 0 || out.Stdout != "42\n" || out.Cwd != "/workspace" {
		t.Fatalf("exec data: %+v", out)
	}

	// A failing command is a result with its exit code and stderr.
	res = sdkCall(t, ts, "runtime_exec", `{"command": "python3 -c 'import sys; print(1/0)'", "cwd": "", "timeoutSeconds": 0}`)
	if res.IsError || !strings.HasPrefix(res.Text, "exit_code: 1\n") || !strings.Contains(res.Text, "ZeroDivisionError") {
		t.Fatalf("failing command: %q", res.Text)
	}
	res = sdkCall(t, ts, "runtime_exec", `{"command": "pwd; exit 7", "cwd": "sub/..//tmp/../", "timeoutSeconds": 0}`)
	if !strings.HasPrefix(res.Text, "exit_code: 7\nstdout:\n/workspace\n") {
		t.Fatalf("cwd: %q", res.Text)
	}
	res = sdkCall(t, ts, "runtime_exec", `{"command": "ls", "cwd": "no/such/dir", "timeoutSeconds": 0}`)
	if !res.IsError || !strings.Contains(res.Text, "/workspace/no/such/dir") {
		t.Fatalf("missing cwd: %+v", res)
	}
	res = sdkCall(t, ts, "runtime_exec", `{"command": "echo start; sleep 30", "cwd": "", "timeoutSeconds": 1}`)
	if res.IsError || !strings.HasPrefix(res.Text, "exit_code: 124\nnote: the command was killed by its timeout after 1 seconds") || !strings.Contains(res.Text, "start") {
		t.Fatalf("timeout: %q", res.Text)
	}

	// Output over the cap: head, tail and a marker; both streams.
	res = sdkCall(t, ts, "runtime_exec", `{"command": "python3 -c \"import sys; print('HEAD'); print('é' * 50000); print('TAIL'); sys.stderr.write('E' * 40000 + 'END')\"", "cwd": "", "timeoutSeconds": 0}`)
	out := res.Data.(*tools.ExecOutput)
	if !strings.HasPrefix(out.Stdout, "HEAD\né") || !strings.HasSuffix(out.Stdout, "é\nTAIL\n") || out.StdoutCutBytes == 0 ||
		!strings.Contains(out.Stdout, "bytes cut from the middle of stdout (100011 bytes in all)") ||
		!strings.HasSuffix(out.Stderr, "EEEEND") || out.StderrCutBytes != 40003-tools.MaxOutputBytes {
		t.Fatalf("capped output: stdout cut %d, stderr cut %d\n%.300s", out.StdoutCutBytes, out.StderrCutBytes, res.Text)
	}
	if len(res.Text) > 2*tools.MaxOutputBytes+1000 || !sdkUTF8Valid(res.Text) {
		t.Fatalf("capped result is %d bytes (or not UTF-8)", len(res.Text))
	}

	// Reading: text, a large text file, a binary file, a directory, a missing file.
	res = sdkCall(t, ts, "runtime_read_file", `{"path": "hello.py"}`)
	if res.IsError || res.Text != "/workspace/hello.py (13 bytes, encoding: utf-8)\nprint(6 * 7)\n" {
		t.Fatalf("read: %q", res.Text)
	}
	sdkCall(t, ts, "runtime_exec", `{"command": "seq 1 20000 > nums.txt; head -c 3000 /dev/urandom > rand.bin; printf 'PNG\\0\\377' > small.bin", "cwd": "", "timeoutSeconds": 0}`)
	res = sdkCall(t, ts, "runtime_read_file", `{"path": "nums.txt"}`)
	rd := res.Data.(*tools.ReadOutput)
	if res.IsError || rd.Encoding != "utf-8" || !strings.HasPrefix(rd.Content, "1\n2\n3\n") || !strings.HasSuffix(rd.Content, "19999\n20000\n") || rd.CutBytes == 0 ||
		!strings.Contains(rd.Content, "bytes cut from the middle of the file (108894 bytes in all)") {
		t.Fatalf("large file: %+v", rd)
	}
	res = sdkCall(t, ts, "runtime_read_file", `{"path": "small.bin"}`)
	rd = res.Data.(*tools.ReadOutput)
	if b, err := base64.StdEncoding.DecodeString(rd.Content); res.IsError || rd.Encoding != "base64" || err != nil || string(b) != "PNG\x00\xff" ||
		!strings.Contains(res.Text, "encoding: base64") {
		t.Fatalf("binary file: %q", res.Text)
	}
	res = sdkCall(t, ts, "runtime_read_file", `{"path": "rand.bin"}`)
	if rd := res.Data.(*tools.ReadOutput); rd.Encoding != "base64" || rd.Size != 3000 || rd.CutBytes != 0 {
		t.Fatalf("random bytes: %+v", rd)
	}
	res = sdkCall(t, ts, "runtime_read_file", `{"path": "/workspace"}`)
	if !res.IsError || !strings.Contains(res.Text, "is a directory") {
		t.Fatalf("read a directory: %+v", res)
	}
	res = sdkCall(t, ts, "runtime_read_file", `{"path": "nope.txt"}`)
	if !res.IsError || !strings.Contains(res.Text, "/workspace/nope.txt does not exist") {
		t.Fatalf("read missing: %+v", res)
	}

	// ".." resolves inside the sandbox's own filesystem: it reaches the
	// sandbox's /etc and /tmp, never the host's.
	res = sdkCall(t, ts, "runtime_read_file", `{"path": "../../../../../proc/version"}`)
	hostVersion, _ := os.ReadFile("/proc/version")
	if res.IsError || !strings.HasPrefix(res.Text, "/proc/version (") || len(hostVersion) == 0 || strings.Contains(res.Text, string(hostVersion)) {
		t.Fatalf("read ../proc/version: %q (host: %q)", res.Text, hostVersion)
	}
	res = sdkCall(t, ts, "runtime_write_file", `{"path": "../../../tmp/escape.txt", "content": "inside"}`)
	if res.IsError || res.Text != "wrote 6 bytes to /tmp/escape.txt" {
		t.Fatalf("write ../tmp: %+v", res)
	}
	if _, err := os.Stat("/tmp/escape.txt"); err == nil {
		t.Fatal("a file written to ../../../tmp reached the host's /tmp")
	}
	res = sdkCall(t, ts, "runtime_exec", `{"command": "cat /tmp/escape.txt", "cwd": "", "timeoutSeconds": 0}`)
	if !strings.Contains(res.Text, "stdout:\ninside\n") {
		t.Fatalf("escape.txt inside the sandbox: %q", res.Text)
	}

	// Listing.
	sdkCall(t, ts, "runtime_exec", `{"command": "mkdir -p src && ln -s hello.py link.py", "cwd": "", "timeoutSeconds": 0}`)
	res = sdkCall(t, ts, "runtime_list_files", `{"path": ""}`)
	for _, want := range []string{"/workspace: 6 entries", "file            13  hello.py", "dir              -  src/", "symlink", "link.py -> hello.py"} {
		if res.IsError || !strings.Contains(res.Text, want) {
			t.Fatalf("list: %q lacks %q", res.Text, want)
		}
	}
	res = sdkCall(t, ts, "runtime_list_files", `{"path": "hello.py"}`)
	if !res.IsError {
		t.Fatalf("list a file: %+v", res)
	}

	// Invalid arguments come back as error results, with what to fix.
	for _, c := range []struct{ tool, args, want string }{
		{"runtime_exec", `{"cwd": ""}`, `missing "command"`},
		{"runtime_exec", `{"command": "ls", "timeoutSeconds": "10"}`, `"timeoutSeconds" must be a whole number`},
		{"runtime_read_file", `{"path": "a", "encoding": "utf-8"}`, `unknown field "encoding"`},
		{"runtime_write_file", `{"path": "a"`, `one JSON object`},
		{"runtime_write_file", `{"path": "a.txt"}`, `missing "content"`},
		{"runtime_list_files", `[]`, `one JSON object`},
	} {
		res := sdkCall(t, ts, c.tool, c.args)
		if !res.IsError || !strings.Contains(res.Text, c.want) {
			t.Errorf("%s %s: %+v", c.tool, c.args, res)
		}
	}

	// Once the sandbox is gone, a call is an error result and a Go error.
	sbx.Close()
	res, err = tools.Dispatch(ctx, ts, "runtime_exec", json.RawMessage(`{"command": "true"}`))
	if !errors.Is(err, withruntime.ErrSandboxStopped) || !res.IsError || !strings.Contains(res.Text, "no longer running") {
		t.Fatalf("after close: %+v %v", res, err)
	}
}

func sdkUTF8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// TestSDKExampleDispatch runs examples/dispatch (a module of its own that
// uses the Go SDK) against the server and checks what it prints.
func TestSDKExampleDispatch(t *testing.T) {
	e := newEnv(t)
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", "run", "./dispatch")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..", "examples")
	cmd.Env = append(os.Environ(), "WITHRUNTIME_URL="+e.http.URL, "WITHRUNTIME_API_KEY="+e.key, "GOFLAGS=-buildvcs=false")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("examples: go run ./dispatch: %v\n%s", err, out)
	}
	want := "runtime_exec\nruntime_read_file\nruntime_write_file\nruntime_list_files\nexit code 0\n42\n"
	if string(out) != want {
		t.Fatalf("example printed:\n%s\nwant:\n%s", out, want)
	}
}

// TestToolsProviderDispatch takes tool calls shaped exactly as each API
// returns them, runs them in a real sandbox, and checks each API's result
// shape, errors flagged its way.
func TestToolsProviderDispatch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sbx, err := e.sdkClient().Create(ctx, withruntime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.Close()
	ts := tools.ForSandbox(sbx)
	decode := func(s string, v any) {
		t.Helper()
		if err := json.Unmarshal([]byte(s), v); err != nil {
			t.Fatal(err)
		}
	}

	// OpenAI Chat Completions: arguments are a JSON string.
	var chat struct {
		Choices []struct {
			Message struct {
				ToolCalls []tools.OpenAIChatToolCall `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	decode(`{"id":"chatcmpl-9","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
		{"id":"call_w","type":"function","function":{"name":"runtime_write_file","arguments":"{\"path\":\"hello.py\",\"content\":\"print(6 * 7)\\n\"}"}}]},
		"finish_reason":"tool_calls"}]}`, &chat)
	msg, err := tools.DispatchOpenAIChat(ctx, ts, chat.Choices[0].Message.ToolCalls[0])
	if b, _ := json.Marshal(msg); err != nil || string(b) != `{"role":"tool","tool_call_id":"call_w","content":"wrote 13 bytes to /workspace/hello.py"}` {
		t.Fatalf("chat: %s %v", b, err)
	}

	// OpenAI Responses: a function_call output item.
	var resp struct {
		Output []tools.OpenAIResponsesFunctionCall `json:"output"`
	}
	decode(`{"id":"resp_9","object":"response","output":[{"type":"function_call","id":"fc_9","call_id":"call_x",
		"name":"runtime_exec","arguments":"{\"command\":\"python3 hello.py\",\"cwd\":\"\",\"timeoutSeconds\":0}","status":"completed"}]}`, &resp)
	out, err := tools.DispatchOpenAIResponses(ctx, ts, resp.Output[0])
	if err != nil || out.Type != "function_call_output" || out.CallID != "call_x" || out.Output != "exit_code: 0\nstdout:\n42\nstderr: (empty)" {
		t.Fatalf("responses: %+v %v", out, err)
	}

	// Anthropic: tool_use blocks with an input object; is_error on failure.
	var msgs struct {
		Content []tools.AnthropicToolUse `json:"content"`
	}
	decode(`{"id":"msg_9","type":"message","role":"assistant","content":[
		{"type":"tool_use","id":"toolu_r","name":"runtime_read_file","input":{"path":"hello.py"}},
		{"type":"tool_use","id":"toolu_m","name":"runtime_read_file","input":{"path":"missing.py"}}],"stop_reason":"tool_use"}`, &msgs)
	tr, err := tools.DispatchAnthropic(ctx, ts, msgs.Content[0])
	if err != nil || tr.IsError || tr.ToolUseID != "toolu_r" || !strings.HasSuffix(tr.Content, "\nprint(6 * 7)\n") {
		t.Fatalf("anthropic: %+v %v", tr, err)
	}
	tr, err = tools.DispatchAnthropic(ctx, ts, msgs.Content[1])
	if b, _ := json.Marshal(tr); err != nil || !tr.IsError || !strings.Contains(string(b), `"is_error":true`) {
		t.Fatalf("anthropic error: %s %v", b, err)
	}

	// Gemini: functionCall parts with an args object; "output" or "error".
	var gem struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					FunctionCall *tools.GeminiFunctionCall `json:"functionCall"`
				} `json:"parts"`
			} `json:"content"`
		} `json:"candidates"`
	}
	decode(`{"candidates":[{"content":{"role":"model","parts":[
		{"functionCall":{"id":"g1","name":"runtime_list_files","args":{"path":""}}},
		{"functionCall":{"name":"runtime_list_files","args":{"path":"nowhere"}}}]},"finishReason":"STOP"}]}`, &gem)
	parts := gem.Candidates[0].Content.Parts
	fr, err := tools.DispatchGemini(ctx, ts, *parts[0].FunctionCall)
	if o, _ := fr.FunctionResponse.Response["output"].(string); err != nil || fr.FunctionResponse.ID != "g1" || !strings.Contains(o, "hello.py") {
		t.Fatalf("gemini: %+v %v", fr, err)
	}
	fr, err = tools.DispatchGemini(ctx, ts, *parts[1].FunctionCall)
	if e, ok := fr.FunctionResponse.Response["error"].(string); err != nil || !ok || !strings.Contains(e, "/workspace/nowhere") {
		t.Fatalf("gemini error: %+v %v", fr, err)
	}
}
