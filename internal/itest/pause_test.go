package itest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// counterServer is a Python process that holds a counter in memory and
// serves it over HTTP on 127.0.0.1:8000: every GET adds one and answers
// the new value.
const counterServer = `python3 -c '
import http.server
n = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global n
        n += 1
        self.send_response(200); self.end_headers(); self.wfile.write(str(n).encode())
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", 8000), H).serve_forever()
'`

// startCounter starts counterServer as a background process in sandbox id
// and waits until it answers.
func (e *env) startCounter(id string) {
	e.t.Helper()
	var p agentapi.Process
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+id+"/processes", agentapi.ExecRequest{Command: counterServer}, &p)
	res := e.sh(id, `for i in $(seq 100); do curl -sf localhost:8000/ready >/dev/null && exit 0; sleep 0.1; done; exit 1`)
	if res.ExitCode != 0 {
		e.t.Fatalf("the counter server did not start: %+v", res)
	}
}

// count asks sandbox id's counter server for its next value.
func (e *env) count(id string) string {
	e.t.Helper()
	res := e.sh(id, "curl -sf localhost:8000/")
	if res.ExitCode != 0 {
		e.t.Fatalf("the counter server does not answer: %+v", res)
	}
	return res.Stdout
}

func (e *env) pause(id string) api.Sandbox {
	e.t.Helper()
	var sb api.Sandbox
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+id+"/pause", nil, &sb)
	if sb.State != "paused" || sb.PausedAt == nil || sb.ImageBytes <= 0 {
		e.t.Fatalf("after pause: %+v, want paused with pausedAt and an image", sb)
	}
	return sb
}

func (e *env) resume(id string) api.Sandbox {
	e.t.Helper()
	var sb api.Sandbox
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+id+"/resume", nil, &sb)
	if sb.State != "running" || sb.PausedAt != nil {
		e.t.Fatalf("after resume: %+v, want running", sb)
	}
	return sb
}

// TestPauseResumeKeepsState: a paused sandbox resumes where it was: a
// process's memory (a counter that goes on counting), its listening HTTP
// server, files in /workspace (the disk) and /tmp (memory), its environment
// and network policy.
func TestPauseResumeKeepsState(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{Env: map[string]string{"FOO": "bar"}})
	e.startCounter(sb.ID)
	for _, want := range []string{"2", "3"} { // 1 went to the readiness probe
		if got := e.count(sb.ID); got != want {
			t.Fatalf("counter: %q, want %q", got, want)
		}
	}
	e.sh(sb.ID, "echo on-disk > /workspace/a && echo in-memory > /tmp/b && head -c 20000000 /dev/urandom > /workspace/big && sha256sum /workspace/big > /tmp/sum")
	start := time.Now()
	p := e.pause(sb.ID)
	t.Logf("pause took %s; image %d MiB", time.Since(start), p.ImageBytes>>20)
	if got := e.get(sb.ID); got.State != "paused" {
		t.Fatalf("GET after pause: state %q", got.State)
	}
	// Not autoResume: requests are refused, the sandbox stays paused.
	status, data := e.do("POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{Command: "true"})
	if status != http.StatusConflict || errorCode(t, data) != "sandbox_paused" {
		t.Fatalf("exec on a paused sandbox: %d %s, want 409 sandbox_paused", status, data)
	}
	start = time.Now()
	e.resume(sb.ID)
	t.Logf("resume took %s", time.Since(start))
	if got := e.count(sb.ID); got != "4" {
		t.Fatalf("counter after resume: %q, want 4 (it must go on from its memory)", got)
	}
	res := e.sh(sb.ID, "cat /workspace/a /tmp/b; sha256sum -c /tmp/sum >/dev/null && echo sum-ok; echo $FOO")
	if want := "on-disk\nin-memory\nsum-ok\nbar\n"; res.Stdout != want {
		t.Fatalf("after resume: %q (stderr %q), want %q", res.Stdout, res.Stderr, want)
	}
}

// TestPauseBadInput: pausing a paused sandbox or resuming a running one is
// a 409 that says the state; unknown ids are 404; a stopped sandbox is 410.
func TestPauseBadInput(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	status, data := e.do("POST", "/v1/sandboxes/"+sb.ID+"/resume", nil)
	if status != http.StatusConflict || !strings.Contains(string(data), "running") {
		t.Fatalf("resume of a running sandbox: %d %s, want 409 naming its state", status, data)
	}
	e.pause(sb.ID)
	status, data = e.do("POST", "/v1/sandboxes/"+sb.ID+"/pause", nil)
	if status != http.StatusConflict || !strings.Contains(string(data), "paused") {
		t.Fatalf("pause of a paused sandbox: %d %s, want 409 naming its state", status, data)
	}
	e.expectError(http.StatusNotFound, "not_found", "POST", "/v1/sandboxes/sbx_nope/pause", nil)
	e.expectError(http.StatusBadRequest, "bad_request", "POST", "/v1/sandboxes", map[string]any{"onLeaseEnd": "hibernate"})
	e.expectError(http.StatusBadRequest, "bad_request", "POST", "/v1/sandboxes/"+sb.ID+"/resume", map[string]any{"timeoutSeconds": -1})
	var list api.SandboxList
	e.must(http.StatusOK, "GET", "/v1/sandboxes?state=paused", nil, &list)
	if len(list.Sandboxes) != 1 || list.Sandboxes[0].ID != sb.ID {
		t.Fatalf("list state=paused: %+v", list.Sandboxes)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
	e.expectError(http.StatusGone, "sandbox_stopped", "POST", "/v1/sandboxes/"+sb.ID+"/resume", nil)
	if left := e.leftovers(sb.ID); len(left) > 0 {
		t.Fatalf("a paused sandbox deleted left %v", left)
	}
}
