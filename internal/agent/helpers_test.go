package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// testAgent is an agent serving on a unix socket in a temp dir.
type testAgent struct {
	t         *testing.T
	client    *http.Client
	workspace string
	socket    string
}

func currentUser(t *testing.T) string {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

// shortTempDir is a temp dir with a short path (unix sockets allow ~108 bytes).
func shortTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "ag")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// newTestAgent serves a Server for cfg (defaults: current user, temp workspace).
func newTestAgent(t *testing.T, cfg Config) *testAgent {
	t.Helper()
	return newTestAgentWith(t, cfg, nil)
}

// newTestAgentWith is newTestAgent with tweak applied to the Server before
// it serves.
func newTestAgentWith(t *testing.T, cfg Config, tweak func(*Server)) *testAgent {
	t.Helper()
	if cfg.User == "" {
		cfg.User = currentUser(t)
	}
	if cfg.Workspace == "" {
		cfg.Workspace = t.TempDir()
	}
	cfg.Version = "test"
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(srv)
	}
	sock := filepath.Join(shortTempDir(t), "agent.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return newClientAgent(t, sock, cfg.Workspace)
}

func newClientAgent(t *testing.T, sock, ws string) *testAgent {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		MaxIdleConnsPerHost: 64,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &testAgent{t: t, client: &http.Client{Transport: tr}, workspace: ws, socket: sock}
}

// do sends a request; body may be nil, []byte, an io.Reader or a value to
// encode as JSON.
func (a *testAgent) do(ctx context.Context, method, path string, body any, hdr ...string) *http.Response {
	a.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	case io.Reader:
		r = b
	default:
		data, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://agent"+path, r)
	if err != nil {
		a.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// call sends a request, checks the status and decodes a JSON answer into out.
func (a *testAgent) call(method, path string, body any, wantStatus int, out any) {
	a.t.Helper()
	resp := a.do(context.Background(), method, path, body)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		a.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, wantStatus, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			a.t.Fatalf("%s %s: decode %q: %v", method, path, data, err)
		}
	}
}

// apiErr sends a request that must fail with status and code.
func (a *testAgent) apiErr(method, path string, body any, status int, code string) agentapi.Error {
	a.t.Helper()
	var eb agentapi.ErrorBody
	a.call(method, path, body, status, &eb)
	if eb.Error.Code != code || eb.Error.Message == "" {
		a.t.Fatalf("%s %s: error %+v, want code %q and a message", method, path, eb.Error, code)
	}
	return eb.Error
}

func (a *testAgent) exec(req agentapi.ExecRequest) agentapi.ExecResult {
	a.t.Helper()
	var res agentapi.ExecResult
	a.call("POST", "/exec", req, http.StatusOK, &res)
	return res
}

// timedEvent is an event and when it arrived, since the request was sent.
type timedEvent struct {
	agentapi.Event
	at time.Duration
}

// stream reads an NDJSON answer to the end, without its heartbeats.
func (a *testAgent) stream(method, path string, body any) []timedEvent {
	a.t.Helper()
	var evs []timedEvent
	for _, ev := range a.streamAll(method, path, body) {
		if ev.Type != agentapi.EventHeartbeat {
			evs = append(evs, ev)
		}
	}
	return evs
}

// streamAll reads an NDJSON answer to the end, heartbeats included.
func (a *testAgent) streamAll(method, path string, body any) []timedEvent {
	a.t.Helper()
	start := time.Now()
	resp := a.do(context.Background(), method, path, body, "Accept", agentapi.ContentTypeNDJSON)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != agentapi.ContentTypeNDJSON {
		data, _ := io.ReadAll(resp.Body)
		a.t.Fatalf("%s %s: status %d (%s): %s", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	var evs []timedEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var ev agentapi.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			a.t.Fatalf("bad event line %q: %v", sc.Text(), err)
		}
		evs = append(evs, timedEvent{ev, time.Since(start)})
	}
	if err := sc.Err(); err != nil {
		a.t.Fatal(err)
	}
	return evs
}

// joined concatenates the data of events of type typ.
func joined(evs []timedEvent, typ string) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == typ {
			b.WriteString(e.Data)
		}
	}
	return b.String()
}

// procsMatching lists pids whose command line contains every word.
func procsMatching(words ...string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		data, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(data) == 0 {
			continue
		}
		cmd := strings.ReplaceAll(string(data), "\x00", " ")
		all := true
		for _, w := range words {
			if !strings.Contains(cmd, w) {
				all = false
			}
		}
		if all {
			out = append(out, e.Name()+": "+cmd)
		}
	}
	return out
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// noProcs waits until no process matches the words.
func noProcs(t *testing.T, d time.Duration, words ...string) {
	t.Helper()
	eventually(t, d, "processes still alive: "+strings.Join(words, " "), func() bool {
		return len(procsMatching(words...)) == 0
	})
}
