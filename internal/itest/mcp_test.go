package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/sdk/go/tools"
)

var (
	withruntimeOnce sync.Once
	withruntimeBin  string
	withruntimeErr  error
)

// buildWithruntime builds the withruntime binary once per test run.
func buildWithruntime(t *testing.T) string {
	t.Helper()
	withruntimeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "itest-withruntime-")
		if err != nil {
			withruntimeErr = err
			return
		}
		withruntimeBin = filepath.Join(dir, "withruntime")
		out, err := exec.Command("go", "build", "-o", withruntimeBin, "withruntime.dev/runtime/cmd/withruntime").CombinedOutput()
		if err != nil {
			withruntimeErr = &buildError{err, out}
		}
	})
	if withruntimeErr != nil {
		t.Fatalf("building withruntime: %v", withruntimeErr)
	}
	return withruntimeBin
}

type buildError struct {
	err error
	out []byte
}

func (b *buildError) Error() string { return b.err.Error() + "\n" + string(b.out) }

// running lists the server's running sandboxes.
func (e *env) running() []api.Sandbox {
	var list api.SandboxList
	e.must(http.StatusOK, "GET", "/v1/sandboxes?state=running", nil, &list)
	return list.Sandboxes
}

func mcpText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d contents", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("result content is %T", res.Content[0])
	}
	return tc.Text
}

func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// TestMCPStdio drives `withruntime mcp` as an MCP client does: as a command
// speaking MCP on stdin/stdout, with the official Go SDK's client.
func TestMCPStdio(t *testing.T) {
	e := newEnv(t)
	bin := buildWithruntime(t)
	ctx := context.Background()
	cmd := exec.Command(bin, "mcp", "--lease", "10m")
	cmd.Env = append(os.Environ(), "WITHRUNTIME_URL="+e.http.URL, "WITHRUNTIME_API_KEY="+e.key)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "itest", Version: "0.0.1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer cs.Close()

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defs := tools.Definitions()
	if len(list.Tools) != len(defs) {
		t.Fatalf("listed %d tools, want %d", len(list.Tools), len(defs))
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range list.Tools {
		byName[tool.Name] = tool
	}
	for _, d := range defs {
		tool := byName[d.Name]
		if tool == nil {
			t.Errorf("tool %s not listed", d.Name)
			continue
		}
		var want, got any
		json.Unmarshal(d.InputSchema, &want)
		b, _ := json.Marshal(tool.InputSchema)
		json.Unmarshal(b, &got)
		if tool.Description != d.Description || !reflect.DeepEqual(got, want) {
			t.Errorf("tool %s: listed schema %s", d.Name, b)
		}
	}
	if n := len(e.running()); n != 0 {
		t.Fatalf("%d sandboxes before the first tool call; want them created lazily", n)
	}

	res := mcpCall(t, cs, "runtime_write_file", map[string]any{"path": "hello.py", "content": "print(6 * 7)\n"})
	if res.IsError || mcpText(t, res) != "wrote 13 bytes to /workspace/hello.py" {
		t.Fatalf("write: %+v", res)
	}
	res = mcpCall(t, cs, "runtime_exec", map[string]any{"command": "python3 hello.py", "cwd": "", "timeoutSeconds": 0})
	if res.IsError || mcpText(t, res) != "exit_code: 0\nstdout:\n42\nstderr: (empty)" {
		t.Fatalf("exec: %q", mcpText(t, res))
	}
	res = mcpCall(t, cs, "runtime_exec", map[string]any{"command": "ls /nonexistent"})
	if res.IsError || !strings.HasPrefix(mcpText(t, res), "exit_code: 2\n") || !strings.Contains(mcpText(t, res), "No such file") {
		t.Fatalf("failing command: %q", mcpText(t, res))
	}
	res = mcpCall(t, cs, "runtime_read_file", map[string]any{"path": "hello.py", "mode": "text"})
	if !res.IsError || !strings.Contains(mcpText(t, res), `unknown field "mode"`) {
		t.Fatalf("invalid arguments: %+v", res)
	}
	res = mcpCall(t, cs, "runtime_list_files", map[string]any{"path": ""})
	if res.IsError || !strings.Contains(mcpText(t, res), "hello.py") {
		t.Fatalf("list: %q", mcpText(t, res))
	}
	if n := len(e.running()); n != 1 {
		t.Fatalf("%d sandboxes running during the session, want 1", n)
	}

	// The session ends when the client closes it; the server exits and
	// destroys the sandbox.
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	// stderr is whole once the command has exited (Close waits for it).
	waitFor(t, 15*time.Second, "the session's sandbox to be destroyed, the mcp command's stderr: "+stderr.String(),
		func() bool { return len(e.running()) == 0 })
}

// mcpHTTP is a running `withruntime mcp --http`.
type mcpHTTP struct {
	addr   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan error
}

// startMCPHTTP starts `withruntime mcp --http` on a free loopback port,
// with extra environment variables and arguments, and waits until it
// listens.
func startMCPHTTP(t *testing.T, e *env, extraEnv []string, args ...string) *mcpHTTP {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(buildWithruntime(t), append([]string{"mcp", "--http", addr, "--lease", "10m"}, args...)...)
	cmd.Env = append(append(os.Environ(), "WITHRUNTIME_URL="+e.http.URL, "WITHRUNTIME_API_KEY="+e.key), extraEnv...)
	m := &mcpHTTP{addr: addr, cmd: cmd, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = m.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-m.exited
	})
	waitFor(t, 10*time.Second, "the MCP HTTP server to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return m
}

// connect opens an MCP session with the official Go SDK's client, sending
// token as a bearer token.
func (m *mcpHTTP) connect(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "itest", Version: "0.0.1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: "http://" + m.addr + "/mcp", DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: bearerTransport{token}},
	}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, m.stderr.String())
	}
	return cs
}

// bearerTransport adds `Authorization: Bearer token` to each request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestMCPStreamableHTTP serves MCP over streamable HTTP: each session gets
// its own sandbox, destroyed when the session ends, and all of them when the
// server stops.
func TestMCPStreamableHTTP(t *testing.T) {
	e := newEnv(t)
	const token = "itest-mcp-token-0123456789"
	m := startMCPHTTP(t, e, []string{"WITHRUNTIME_MCP_TOKEN=" + token})
	cmd, exited, stderr := m.cmd, m.exited, m.stderr
	connect := func() *mcp.ClientSession { return m.connect(t, token) }
	a, b := connect(), connect()
	defer b.Close()
	res := mcpCall(t, a, "runtime_write_file", map[string]any{"path": "mine.txt", "content": "a"})
	if res.IsError {
		t.Fatalf("write in session a: %q", mcpText(t, res))
	}
	res = mcpCall(t, b, "runtime_exec", map[string]any{"command": "ls /workspace; echo done"})
	if strings.Contains(mcpText(t, res), "mine.txt") || !strings.Contains(mcpText(t, res), "done") {
		t.Fatalf("session b sees session a's files: %q", mcpText(t, res))
	}
	if n := len(e.running()); n != 2 {
		t.Fatalf("%d sandboxes for 2 sessions", n)
	}
	a.Close()
	waitFor(t, 15*time.Second, "session a's sandbox to be destroyed", func() bool { return len(e.running()) == 1 })

	// Stopping the server destroys the remaining sandbox.
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("withruntime mcp did not exit on SIGTERM\n%s", stderr.String())
	}
	exited <- nil
	if n := len(e.running()); n != 0 {
		t.Fatalf("%d sandboxes left after the server stopped\n%s", n, stderr.String())
	}
}

// TestMCPLeaseEnd: a session idle past its sandbox's lease goes on in a new
// sandbox, and the model is told its files are gone.
// TestMCPPauseIdle: with --pause-idle a session idle for a whole lease
// finds its sandbox paused, not destroyed, and its next call resumes it
// with its files and processes; with --pause-mode filesystem the image
// holds the files alone, and the resumed sandbox has its files and a fresh
// boot.
func TestMCPPauseIdle(t *testing.T) {
	for _, mode := range []string{"full", "filesystem"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			cs, _ := e.mcpSession("--lease", "2s", "--pause-idle", "--pause-mode", mode)
			if res := mcpCall(t, cs, "runtime_write_file", map[string]any{"path": "mine.txt", "content": "kept"}); res.IsError {
				t.Fatalf("write: %q", mcpText(t, res))
			}
			// A process that outlives the call: back after a full pause only.
			if res := mcpCall(t, cs, "runtime_exec", map[string]any{"command": "nohup sleep 1000 >/dev/null 2>&1 &"}); res.IsError {
				t.Fatalf("start sleep: %q", mcpText(t, res))
			}
			first := e.running()
			if len(first) != 1 {
				t.Fatalf("running: %+v", first)
			}
			waitFor(t, 15*time.Second, "the idle sandbox to be paused", func() bool { return e.get(first[0].ID).State == "paused" })
			if got := e.get(first[0].ID).ImageMode; got != mode {
				t.Errorf("the paused image's mode is %q, want %q", got, mode)
			}
			res := mcpCall(t, cs, "runtime_exec", map[string]any{"command": "cat mine.txt; pgrep -x sleep >/dev/null && echo sleeping || echo no-sleep"})
			text := mcpText(t, res)
			if res.IsError || !strings.Contains(text, "kept") || strings.Contains(text, "note:") {
				t.Fatalf("after the idle pause: %q", text)
			}
			if want := map[string]string{"full": "sleeping", "filesystem": "no-sleep"}[mode]; !strings.Contains(text, want) {
				t.Errorf("after a %s pause: %q, want %q", mode, text, want)
			}
			if now := e.running(); len(now) != 1 || now[0].ID != first[0].ID {
				t.Fatalf("sandboxes before %v, after %v: the same one should run again", first, now)
			}
		})
	}
}

func TestMCPLeaseEnd(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.mcpSession("--lease", "2s")
	if res := mcpCall(t, cs, "runtime_write_file", map[string]any{"path": "mine.txt", "content": "a"}); res.IsError {
		t.Fatalf("write: %q", mcpText(t, res))
	}
	first := e.running()
	waitFor(t, 10*time.Second, "the lease to end", func() bool { return len(e.running()) == 0 })
	res := mcpCall(t, cs, "runtime_exec", map[string]any{"command": "cat mine.txt"})
	text := mcpText(t, res)
	if res.IsError || !strings.HasPrefix(text, "note: the previous sandbox's lease ended") || !strings.Contains(text, "exit_code: 1") {
		t.Fatalf("after the lease ended: %q", text)
	}
	if now := e.running(); len(first) != 1 || len(now) != 1 || now[0].ID == first[0].ID {
		t.Fatalf("sandboxes before %v, after %v", first, now)
	}
}

// TestMCPHTTPGuard (case C32): the MCP HTTP server refuses web pages of
// other origins (403, against DNS rebinding), requests without its token
// or a Runtime key (401), and a non-loopback address without a configured
// token (at start). A Runtime key's session runs its sandbox under that key.
func TestMCPHTTPGuard(t *testing.T) {
	e := newEnv(t)
	m := startMCPHTTP(t, e, nil, "--allow-origin", "http://localhost:6274")
	var token string
	waitFor(t, 5*time.Second, "the generated token on stderr", func() bool {
		token = regexp.MustCompile(`mcp_[0-9a-f]{48}`).FindString(m.stderr.String())
		return token != ""
	})
	_, port, _ := net.SplitHostPort(m.addr)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"itest","version":"0"}}}`
	post := func(hdr ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("POST", "http://"+m.addr+"/mcp", strings.NewReader(initialize))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for i := 0; i+1 < len(hdr); i += 2 {
			if hdr[i] == "Host" {
				req.Host = hdr[i+1]
				continue
			}
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	bearer := "Bearer " + token
	for _, c := range []struct {
		name   string
		hdr    []string
		status int
	}{
		{"another origin", []string{"Origin", "http://evil.example", "Authorization", bearer}, 403},
		{"another origin, no token", []string{"Origin", "http://evil.example"}, 403},
		{"another port", []string{"Origin", "http://127.0.0.1:1", "Authorization", bearer}, 403},
		{"null origin", []string{"Origin", "null", "Authorization", bearer}, 403},
		{"a rebound name", []string{"Host", "evil.example:" + port, "Authorization", bearer}, 403},
		{"no token", nil, 401},
		{"a wrong token", []string{"Authorization", "Bearer mcp_wrong"}, 401},
		{"the token without Bearer", []string{"Authorization", token}, 401},
		{"an unknown Runtime key", []string{"Authorization", "Bearer wr_notarealkeyatall"}, 401},
		{"the token", []string{"Authorization", bearer}, 200},
		{"its own origin", []string{"Origin", "http://" + m.addr, "Authorization", bearer}, 200},
		{"localhost", []string{"Origin", "http://localhost:" + port, "Authorization", bearer}, 200},
		{"an allowed origin", []string{"Origin", "http://localhost:6274", "Authorization", bearer}, 200},
	} {
		if status, body := post(c.hdr...); status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, status, body, c.status)
		}
	}

	// A tenant key opens a session of its own: its sandbox is the key's.
	var tenant api.Key
	e.must(201, "POST", "/v1/keys", api.CreateKeyRequest{Name: "mcp-tenant", DailyLimitMicros: 1_000_000}, &tenant)
	cs := m.connect(t, tenant.Secret)
	defer cs.Close()
	if res := mcpCall(t, cs, "runtime_exec", map[string]any{"command": "echo hi"}); res.IsError || !strings.Contains(mcpText(t, res), "hi") {
		t.Fatalf("exec with a tenant key: %q", mcpText(t, res))
	}
	var mine api.SandboxList
	status, data := e.do("GET", "/v1/sandboxes?state=running", nil, "Authorization", "Bearer "+tenant.Secret)
	if err := json.Unmarshal(data, &mine); status != 200 || err != nil || len(mine.Sandboxes) != 1 {
		t.Fatalf("the tenant key's sandboxes: %d %s", status, data)
	}
}

// TestMCPHTTPNeedsTokenOffLoopback: binding every interface without a
// configured token is refused at start, before the port is open; so is a
// short token.
func TestMCPHTTPNeedsTokenOffLoopback(t *testing.T) {
	e := newEnv(t)
	bin := buildWithruntime(t)
	for _, c := range []struct {
		addr string
		env  []string
		want string
	}{
		{"0.0.0.0:7781", nil, "not a loopback address"},
		{":7781", nil, "not a loopback address"},
		{"[::]:7781", nil, "not a loopback address"},
		{"127.0.0.1:0", []string{"WITHRUNTIME_MCP_TOKEN=short"}, "at least 16"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, "mcp", "--http", c.addr)
		cmd.Env = append(append(os.Environ(), "WITHRUNTIME_URL="+e.http.URL, "WITHRUNTIME_API_KEY="+e.key, "WITHRUNTIME_MCP_TOKEN="), c.env...)
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil || timedOut || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "WITHRUNTIME_MCP_TOKEN") {
			t.Errorf("--http %s %v: err %v, output %s; want a refusal saying %q", c.addr, c.env, err, out, c.want)
		}
	}
}
