package itest

// Streaming through the server's reverse proxy: NDJSON events in order and
// as they happen (never buffered to the end), a client that leaves kills
// the command, and background processes through the public API.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// stampedEvent is an NDJSON event with when it arrived, counted from the
// moment the request was sent.
type stampedEvent struct {
	agentapi.Event
	at time.Duration
}

// streamNDJSON posts body to path with Accept: application/x-ndjson and
// reads events as they arrive; each is passed to onEvent (which may be nil)
// as soon as it is read.
func (e *env) streamNDJSON(ctx context.Context, path string, body any, onEvent func(stampedEvent)) []stampedEvent {
	e.t.Helper()
	var r *bytes.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		r = bytes.NewReader(data)
	} else {
		r = bytes.NewReader(nil)
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", e.http.URL+path, r)
	req.Header.Set("Authorization", "Bearer "+e.key)
	req.Header.Set("Accept", agentapi.ContentTypeNDJSON)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != agentapi.ContentTypeNDJSON {
		data, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("POST %s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	var evs []stampedEvent
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var ev stampedEvent
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.DisallowUnknownFields()
			if derr := dec.Decode(&ev.Event); derr != nil {
				e.t.Fatalf("NDJSON line %q: %v", line, derr)
			}
			ev.at = time.Since(start)
			if ev.Type != agentapi.EventHeartbeat {
				evs = append(evs, ev)
				if onEvent != nil {
					onEvent(ev)
				}
			}
		}
		if err != nil {
			break
		}
	}
	return evs
}

// checkStreamShape checks start first, one final exit or error last, and
// nothing else of those kinds.
func checkStreamShape(t *testing.T, name string, evs []stampedEvent) {
	t.Helper()
	if len(evs) < 2 || evs[0].Type != "start" || evs[0].Pid <= 0 {
		t.Fatalf("%s: no start event first: %+v", name, evs)
	}
	last := evs[len(evs)-1]
	if last.Type != "exit" && last.Type != "error" {
		t.Fatalf("%s: the stream does not end with exit or error: %+v", name, evs)
	}
	if last.Type == "exit" && last.Result == nil {
		t.Fatalf("%s: exit without a result", name)
	}
	for i, ev := range evs[1 : len(evs)-1] {
		if ev.Type != "stdout" && ev.Type != "stderr" {
			t.Errorf("%s: event %d is %q between start and end", name, i+1, ev.Type)
		}
	}
}

// outputRuns merges consecutive output events of the same stream, as
// "stdout:TEXT" items.
func outputRuns(evs []stampedEvent) []string {
	var runs []string
	prev := ""
	for _, ev := range evs {
		if ev.Type != "stdout" && ev.Type != "stderr" {
			continue
		}
		if ev.Type == prev {
			runs[len(runs)-1] += ev.Data
		} else {
			runs = append(runs, ev.Type+":"+ev.Data)
		}
		prev = ev.Type
	}
	return runs
}

func TestStreamExec(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	sbx := "/v1/sandboxes/" + sb.ID
	ctx := context.Background()

	// Order: start, output as it was written across both streams, exit last.
	evs := e.streamNDJSON(ctx, sbx+"/exec", agentapi.ExecRequest{
		Command: "echo o1; sleep 0.2; echo e1 >&2; sleep 0.2; echo o2; sleep 0.2; echo e2 >&2; exit 5"}, nil)
	checkStreamShape(t, "ordered", evs)
	if got := strings.Join(outputRuns(evs), "|"); got != "stdout:o1\n|stderr:e1\n|stdout:o2\n|stderr:e2\n" {
		t.Errorf("output order: %q", got)
	}
	res := evs[len(evs)-1].Result
	if res.ExitCode != 5 || res.Stdout != "" || res.Stderr != "" || res.StdoutBytes != 6 || res.StderrBytes != 6 {
		t.Errorf("exit event: %+v", res)
	}

	// Not buffered: the first line arrives at once, the rest a second apart.
	evs = e.streamNDJSON(ctx, sbx+"/exec", agentapi.ExecRequest{Command: "for i in 1 2 3; do echo $i; sleep 1; done"}, nil)
	checkStreamShape(t, "paced", evs)
	var outAt []time.Duration
	for _, ev := range evs {
		if ev.Type == "stdout" {
			outAt = append(outAt, ev.at)
		}
	}
	if got := strings.Join(outputRuns(evs), "|"); got != "stdout:1\n2\n3\n" || len(outAt) != 3 {
		t.Fatalf("paced output: %q in %d events", got, len(outAt))
	}
	t.Logf("paced output arrived at %v, exit at %v", outAt, evs[len(evs)-1].at)
	if outAt[0] > 1500*time.Millisecond {
		t.Errorf("the first chunk took %v to arrive through the server (want < 1.5s)", outAt[0])
	}
	if outAt[2]-outAt[0] < 1500*time.Millisecond {
		t.Errorf("chunks arrived together (at %v): the stream is buffered", outAt)
	}

	// A client that goes away kills the command's whole tree.
	cctx, cancel := context.WithCancel(ctx)
	e.streamNDJSON(cctx, sbx+"/exec", agentapi.ExecRequest{Command: "sleep 123 & sleep 124; echo never"}, func(ev stampedEvent) {
		if ev.Type == "start" {
			waitFor(t, 5*time.Second, "the command to run", func() bool {
				return strings.Count(e.sh(sb.ID, `grep -las 'slee[p].12[34]' /proc/[0-9]*/cmdline`).Stdout, "\n") >= 2
			})
			cancel()
		}
	})
	cancel()
	waitFor(t, 10*time.Second, "the abandoned command to be killed", func() bool {
		return e.sh(sb.ID, `grep -las 'slee[p].12[34]' /proc/[0-9]*/cmdline`).Stdout == ""
	})

	// Waiting on a background process streams the same way.
	var p agentapi.Process
	e.must(201, "POST", sbx+"/processes", agentapi.ExecRequest{Command: "for i in 1 2 3; do echo $i; sleep 1; done; echo done >&2"}, &p)
	evs = e.streamNDJSON(ctx, fmt.Sprintf("%s/processes/%d/wait", sbx, p.Pid), nil, nil)
	checkStreamShape(t, "wait", evs)
	if evs[0].Pid != p.Pid || evs[len(evs)-1].Type != "exit" || evs[len(evs)-1].Result.ExitCode != 0 {
		t.Errorf("wait stream: %+v", evs)
	}
	if got := strings.Join(outputRuns(evs), "|"); got != "stdout:1\n2\n3\n|stderr:done\n" {
		t.Errorf("wait output: %q", got)
	}
	if evs[1].at > 1500*time.Millisecond {
		t.Errorf("the first followed chunk took %v", evs[1].at)
	}
}

func TestBackgroundProcesses(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	sbx := "/v1/sandboxes/" + sb.ID
	proc := func(pid int) string { return fmt.Sprintf("%s/processes/%d", sbx, pid) }

	var sleeper, short agentapi.Process
	e.must(201, "POST", sbx+"/processes", agentapi.ExecRequest{Command: "sleep 300 & sleep 301"}, &sleeper)
	e.must(201, "POST", sbx+"/processes", agentapi.ExecRequest{Argv: []string{"bash", "-c", "echo hi; sleep 0.5; echo bye >&2; exit 2"}, Cwd: "/tmp"}, &short)
	if !sleeper.Running || sleeper.Pid <= 0 || sleeper.Command != "sleep 300 & sleep 301" || sleeper.Cwd != "/workspace" || sleeper.StartedAt.IsZero() {
		t.Errorf("started: %+v", sleeper)
	}
	if short.Cwd != "/tmp" || len(short.Argv) != 3 || short.Command != "" {
		t.Errorf("started with argv: %+v", short)
	}

	var list agentapi.ProcessList
	e.must(200, "GET", sbx+"/processes", nil, &list)
	if len(list.Processes) != 2 || list.Processes[0].Pid != sleeper.Pid || list.Processes[1].Pid != short.Pid {
		t.Fatalf("list: %+v", list)
	}

	var res agentapi.ExecResult
	e.must(200, "POST", proc(short.Pid)+"/wait?timeoutSeconds=30", nil, &res)
	if res.ExitCode != 2 || res.Stdout != "hi\n" || res.Stderr != "bye\n" {
		t.Errorf("wait: %+v", res)
	}
	// Waiting again answers the same result.
	e.must(200, "POST", proc(short.Pid)+"/wait", nil, &res)
	if res.ExitCode != 2 || res.Stdout != "hi\n" {
		t.Errorf("second wait: %+v", res)
	}
	var got agentapi.Process
	e.must(200, "GET", proc(short.Pid), nil, &got)
	if got.Running || got.Result == nil || got.Result.ExitCode != 2 {
		t.Errorf("finished process: %+v", got)
	}

	if n := strings.Count(e.sh(sb.ID, `grep -las 'slee[p].30[01]' /proc/[0-9]*/cmdline`).Stdout, "\n"); n < 2 {
		t.Errorf("the sleeper's group has %d sleeps, want 2", n)
	}
	e.expectError(408, "timeout", "POST", proc(sleeper.Pid)+"/wait?timeoutSeconds=0.3", nil)
	e.must(200, "GET", proc(sleeper.Pid), nil, &got)
	if !got.Running {
		t.Errorf("the sleeper stopped after a timed-out wait: %+v", got)
	}
	e.must(200, "POST", proc(sleeper.Pid)+"/kill", agentapi.KillRequest{Signal: "SIGTERM"}, &got)
	if got.Running || got.Result == nil || got.Result.Signal != "SIGTERM" || got.Result.ExitCode != 143 {
		t.Errorf("killed: %+v", got)
	}
	// The signal went to the whole group: the background sleep is gone too.
	waitFor(t, 5*time.Second, "the process group to end", func() bool {
		return e.sh(sb.ID, `grep -las 'slee[p].30[01]' /proc/[0-9]*/cmdline`).Stdout == ""
	})
	e.must(200, "POST", proc(sleeper.Pid)+"/wait", nil, &res)
	if res.ExitCode != 143 || res.Signal != "SIGTERM" {
		t.Errorf("wait after kill: %+v", res)
	}
	e.must(200, "GET", sbx+"/processes", nil, &list)
	for _, p := range list.Processes {
		if p.Running {
			t.Errorf("still running: %+v", p)
		}
	}
	e.expectError(404, "not_found", "POST", proc(99999)+"/kill", nil)
	e.expectError(404, "not_found", "POST", proc(99999)+"/wait", nil)
}
