package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

func startBackground(t *testing.T, a *testAgent, req agentapi.ExecRequest) agentapi.Process {
	t.Helper()
	var p agentapi.Process
	a.call("POST", "/processes", req, 201, &p)
	if p.Pid <= 0 || !p.Running || p.Cwd != a.workspace {
		t.Fatalf("started %+v", p)
	}
	return p
}

func TestBackgroundStartWaitList(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	p := startBackground(t, a, agentapi.ExecRequest{Command: "echo a; sleep 0.3; echo b >&2; exit 4"})
	var res agentapi.ExecResult
	a.call("POST", fmt.Sprintf("/processes/%d/wait?timeoutSeconds=5", p.Pid), nil, 200, &res)
	if res.ExitCode != 4 || res.Stdout != "a\n" || res.Stderr != "b\n" || res.StdoutBytes != 2 {
		t.Fatalf("wait result %+v", res)
	}
	// A second wait sees the same output (replay buffer).
	a.call("POST", fmt.Sprintf("/processes/%d/wait", p.Pid), nil, 200, &res)
	if res.Stdout != "a\n" {
		t.Fatalf("second wait %+v", res)
	}
	var got agentapi.Process
	a.call("GET", fmt.Sprintf("/processes/%d", p.Pid), nil, 200, &got)
	if got.Running || got.Result == nil || got.Result.ExitCode != 4 || got.Command != p.Command {
		t.Fatalf("process %+v", got)
	}
	var list agentapi.ProcessList
	a.call("GET", "/processes", nil, 200, &list)
	if len(list.Processes) != 1 || list.Processes[0].Pid != p.Pid {
		t.Fatalf("list %+v", list)
	}
	a.apiErr("GET", "/processes/999999999", nil, 404, agentapi.CodeNotFound)
	a.apiErr("GET", "/processes/abc", nil, 400, agentapi.CodeBadRequest)
	a.apiErr("POST", fmt.Sprintf("/processes/%d/kill", p.Pid), agentapi.KillRequest{Signal: "SIGFOO"}, 400, agentapi.CodeBadRequest)
}

func TestBackgroundWaitTimeoutAndKill(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	p := startBackground(t, a, agentapi.ExecRequest{Command: "sleep 1201"})
	start := time.Now()
	a.apiErr("POST", fmt.Sprintf("/processes/%d/wait?timeoutSeconds=0.2", p.Pid), nil, 408, agentapi.CodeTimeout)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("wait timeout took %v", took)
	}
	var killed agentapi.Process
	a.call("POST", fmt.Sprintf("/processes/%d/kill", p.Pid), agentapi.KillRequest{Signal: "TERM"}, 200, &killed)
	if killed.Running || killed.Result == nil || killed.Result.ExitCode != 143 || killed.Result.Signal != "SIGTERM" {
		t.Fatalf("killed %+v", killed)
	}
}

func TestBackgroundKillGroup(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	p := startBackground(t, a, agentapi.ExecRequest{Command: `bash -c 'sleep 1001 | cat & sleep 1002 & trap "" TERM; wait'`})
	eventually(t, 2*time.Second, "children started", func() bool {
		return len(procsMatching("sleep 1001")) > 0 && len(procsMatching("sleep 1002")) > 0
	})
	var killed agentapi.Process
	a.call("POST", fmt.Sprintf("/processes/%d/kill", p.Pid), nil, 200, &killed)
	if killed.Running || killed.Result.ExitCode != 137 || killed.Result.Signal != "SIGKILL" {
		t.Fatalf("killed %+v", killed)
	}
	noProcs(t, 3*time.Second, "sleep 1001")
	noProcs(t, time.Second, "sleep 1002")
}

func TestBackgroundTimeout(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	p := startBackground(t, a, agentapi.ExecRequest{Command: "printf x; sleep 1202", TimeoutSeconds: 0.3})
	var res agentapi.ExecResult
	a.call("POST", fmt.Sprintf("/processes/%d/wait?timeoutSeconds=5", p.Pid), nil, 200, &res)
	if !res.TimedOut || res.ExitCode != 124 || res.Stdout != "x" {
		t.Fatalf("result %+v", res)
	}
}

func TestBackgroundStreamWait(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	p := startBackground(t, a, agentapi.ExecRequest{Command: `echo one; echo err >&2; sleep 0.5; printf 'caf\xc3'; sleep 0.2; printf '\xa9\n'`})
	time.Sleep(200 * time.Millisecond) // "one" is in the replay buffer by now
	evs := a.stream("POST", fmt.Sprintf("/processes/%d/wait", p.Pid), nil)
	if evs[0].Type != "start" || evs[0].Pid != p.Pid || evs[len(evs)-1].Type != "exit" {
		t.Fatalf("events %+v", evs)
	}
	if got := joined(evs, "stdout"); got != "one\ncafé\n" {
		t.Fatalf("stdout %q", got)
	}
	if got := joined(evs, "stderr"); got != "err\n" {
		t.Fatalf("stderr %q", got)
	}
	if evs[1].at > 150*time.Millisecond {
		t.Fatalf("replay came late: %v", evs[1].at)
	}
	// A stream wait with a deadline ends with an error event.
	p = startBackground(t, a, agentapi.ExecRequest{Command: "sleep 1203"})
	evs = a.stream("POST", fmt.Sprintf("/processes/%d/wait?timeoutSeconds=0.2", p.Pid), nil)
	last := evs[len(evs)-1]
	if last.Type != "error" || last.Error == nil || last.Error.Code != agentapi.CodeTimeout {
		t.Fatalf("events %+v", evs)
	}
	a.call("POST", fmt.Sprintf("/processes/%d/kill", p.Pid), nil, 200, nil)
}

func TestBackgroundReplayTail(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	p := startBackground(t, a, agentapi.ExecRequest{Command: `head -c 2000000 /dev/zero | tr '\0' a; echo END`})
	var res agentapi.ExecResult
	a.call("POST", fmt.Sprintf("/processes/%d/wait?timeoutSeconds=10", p.Pid), nil, 200, &res)
	if len(res.Stdout) != agentapi.ReplayBufferBytes || !res.StdoutTruncated || res.StdoutBytes != 2000004 ||
		!strings.HasSuffix(res.Stdout, "aaaEND\n") {
		t.Fatalf("tail: %d bytes kept, truncated %v, count %d", len(res.Stdout), res.StdoutTruncated, res.StdoutBytes)
	}
}

func TestRing(t *testing.T) {
	r := ring{cap: 8}
	var off int64
	for _, chunk := range []string{"abc", "defgh", "ij", "klmnopqrstuvwxyz", "1"} {
		r.write([]byte(chunk))
	}
	data, end, skipped := r.from(off)
	if string(data) != "tuvwxyz1" || end != 27 || !skipped {
		t.Fatalf("from 0: %q %d %v", data, end, skipped)
	}
	data, _, skipped = r.from(25)
	if string(data) != "z1" || skipped {
		t.Fatalf("from 25: %q %v", data, skipped)
	}
	if got := trimPartialRune([]byte("\x98\x95ok")); string(got) != "ok" {
		t.Fatalf("trim %q", got)
	}
}

func TestBackgroundStdinOpen(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	p := startBackground(t, a, agentapi.ExecRequest{Command: "while read l; do echo got:$l; done; echo eof", StdinOpen: true})
	a.call("POST", fmt.Sprintf("/processes/%d/stdin", p.Pid), []byte("one\ntwo\n"), 204, nil)
	a.call("POST", fmt.Sprintf("/processes/%d/stdin/close", p.Pid), nil, 204, nil)
	var res agentapi.ExecResult
	a.call("POST", fmt.Sprintf("/processes/%d/wait?timeoutSeconds=5", p.Pid), nil, 200, &res)
	if res.ExitCode != 0 || res.Stdout != "got:one\ngot:two\neof\n" {
		t.Fatalf("result %+v", res)
	}
	// Closed, and then ended: both refuse a write.
	a.apiErr("POST", fmt.Sprintf("/processes/%d/stdin", p.Pid), []byte("x"), 409, agentapi.CodeConflict)
	a.call("POST", fmt.Sprintf("/processes/%d/stdin/close", p.Pid), nil, 204, nil)

	// Without stdinOpen the process read EOF at once and stdin is closed.
	q := startBackground(t, a, agentapi.ExecRequest{Command: "cat; sleep 5"})
	a.apiErr("POST", fmt.Sprintf("/processes/%d/stdin", q.Pid), []byte("x"), 409, agentapi.CodeConflict)
	a.apiErr("POST", fmt.Sprintf("/processes/%d/stdin", q.Pid), make([]byte, agentapi.MaxStdinWriteBytes+1), 413, agentapi.CodeTooLarge)
	// stdinOpen is for background processes only, and not with stdin.
	a.apiErr("POST", "/exec", agentapi.ExecRequest{Command: "true", StdinOpen: true}, 400, agentapi.CodeBadRequest)
	a.apiErr("POST", "/processes", agentapi.ExecRequest{Command: "true", StdinOpen: true, Stdin: "x"}, 400, agentapi.CodeBadRequest)
}
