package agent

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// firstArg is the --first-exec argument for req.
func firstArg(t *testing.T, req agentapi.ExecRequest, stream bool) string {
	data, err := json.Marshal(agentapi.FirstExec{Exec: req, Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(data)
}

// TestFirstStreamed: a command given at boot runs before the host
// attaches, its output waits (nothing lost, in order), and POST /first
// streams it exactly as POST /exec would; a second attach is refused.
func TestFirstStreamed(t *testing.T) {
	t.Parallel()
	arg := firstArg(t, agentapi.ExecRequest{Command: "echo one; sleep 0.3; seq 1 20000; echo two >&2; exit 4"}, true)
	a := newTestAgentWith(t, Config{}, func(s *Server) { s.StartFirstEncoded(arg) })
	time.Sleep(500 * time.Millisecond) // the command runs, its output waits
	resp := a.do(context.Background(), "POST", "/first", nil, "Accept", agentapi.ContentTypeNDJSON)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != agentapi.ContentTypeNDJSON {
		t.Fatalf("POST /first: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out, errOut strings.Builder
	var evs []agentapi.Event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev agentapi.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		switch ev.Type {
		case "stdout":
			out.WriteString(ev.Data)
		case "stderr":
			errOut.WriteString(ev.Data)
		}
	}
	if len(evs) < 3 || evs[0].Type != "start" || evs[0].Pid <= 0 || evs[len(evs)-1].Type != "exit" {
		t.Fatalf("events: %+v", evs)
	}
	var want strings.Builder
	want.WriteString("one\n")
	for i := 1; i <= 20000; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	if out.String() != want.String() || errOut.String() != "two\n" {
		t.Errorf("output lost or reordered: %d bytes of stdout (want %d), stderr %q", out.Len(), want.Len(), errOut.String())
	}
	if res := evs[len(evs)-1].Result; res.ExitCode != 4 || res.StdoutBytes != int64(want.Len()) {
		t.Errorf("exit: %+v", res)
	}
	a.apiErr("POST", "/first", nil, 409, agentapi.CodeConflict)
}

// TestFirstCollected: collected, capped as POST /exec caps it.
func TestFirstCollected(t *testing.T) {
	t.Parallel()
	arg := firstArg(t, agentapi.ExecRequest{Command: "printf abcdef; exit 2", MaxOutputBytes: 3}, false)
	a := newTestAgentWith(t, Config{}, func(s *Server) { s.StartFirstEncoded(arg) })
	var res agentapi.ExecResult
	a.call("POST", "/first", nil, 200, &res)
	if res.ExitCode != 2 || res.Stdout != "abc" || !res.StdoutTruncated || res.StdoutBytes != 6 {
		t.Errorf("result: %+v", res)
	}
}

// TestFirstCannotStart: a command that cannot run, a garbled argument, or
// none at all: POST /first says so as POST /exec would.
func TestFirstCannotStart(t *testing.T) {
	t.Parallel()
	arg := firstArg(t, agentapi.ExecRequest{Command: "true", Cwd: "/no/such/dir"}, true)
	a := newTestAgentWith(t, Config{}, func(s *Server) { s.StartFirstEncoded(arg) })
	resp := a.do(context.Background(), "POST", "/first", nil, "Accept", agentapi.ContentTypeNDJSON)
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(data), "/no/such/dir") {
		t.Errorf("missing cwd: %d %s", resp.StatusCode, data)
	}
	b := newTestAgentWith(t, Config{}, func(s *Server) { s.StartFirstEncoded("%%%") })
	b.apiErr("POST", "/first", nil, 400, agentapi.CodeBadRequest)
	c := newTestAgent(t, Config{})
	c.apiErr("POST", "/first", nil, 404, agentapi.CodeNotFound)
}
