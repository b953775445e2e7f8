package itest

// A create with a first command (POST /v1/sandboxes with "exec"): the
// sandbox and then the command's answer, streamed (NDJSON) or collected
// (JSON), on a cold create and on a claim from the warm pool; bad input refused before anything boots;
// a command that cannot start leaves the sandbox running and says so.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// createStream posts a create with Accept: application/x-ndjson and
// returns the sandbox event and the exec events after it.
func (e *env) createStream(req api.CreateSandboxRequest) (api.Sandbox, []stampedEvent) {
	e.t.Helper()
	data, _ := json.Marshal(req)
	hr, _ := http.NewRequest("POST", e.http.URL+"/v1/sandboxes", bytes.NewReader(data))
	hr.Header.Set("Authorization", "Bearer "+e.key)
	hr.Header.Set("Accept", agentapi.ContentTypeNDJSON)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Content-Type") != agentapi.ContentTypeNDJSON {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		e.t.Fatalf("create with exec: %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), buf.String())
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 4<<20)
	if !sc.Scan() {
		e.t.Fatalf("create with exec: empty stream: %v", sc.Err())
	}
	var first api.SandboxEvent
	dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&first); err != nil || first.Type != "sandbox" || first.Sandbox.ID == "" {
		e.t.Fatalf("first line %q is not the sandbox event (%v)", sc.Text(), err)
	}
	var evs []stampedEvent
	for sc.Scan() {
		var ev stampedEvent
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev.Event); err != nil {
			e.t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if ev.Type == agentapi.EventHeartbeat {
			continue
		}
		evs = append(evs, ev)
	}
	return first.Sandbox, evs
}

// createCollected posts a create with exec for a JSON answer.
func (e *env) createCollected(req api.CreateSandboxRequest) api.SandboxWithResult {
	e.t.Helper()
	var out api.SandboxWithResult
	e.must(http.StatusCreated, "POST", "/v1/sandboxes", req, &out)
	if out.Sandbox.ID == "" || out.Sandbox.State != "running" {
		e.t.Fatalf("create with exec: sandbox %+v", out.Sandbox)
	}
	return out
}

// checkFirstCommand runs the create-with-exec cases on e: streamed and
// collected, the create's env and the command's own, stdin, exit codes.
func checkFirstCommand(t *testing.T, e *env) {
	sb, evs := e.createStream(api.CreateSandboxRequest{Env: map[string]string{"A": "from-create"},
		Exec: &agentapi.ExecRequest{Command: `echo "$A $B $(pwd)"; sleep 0.2; echo err >&2; exit 3`, Env: map[string]string{"B": "from-exec"}}})
	checkStreamShape(t, "stream", evs)
	if got := strings.Join(outputRuns(evs), "|"); got != "stdout:from-create from-exec /workspace\n|stderr:err\n" {
		t.Errorf("stream output: %q", got)
	}
	if res := evs[len(evs)-1].Result; res.ExitCode != 3 || res.StdoutBytes != 33 || res.Stdout != "" {
		t.Errorf("stream exit: %+v", res)
	}
	if got := e.get(sb.ID); got.State != "running" {
		t.Errorf("the sandbox after its first command: %+v", got)
	}
	if res := e.sh(sb.ID, "echo again"); res.Stdout != "again\n" {
		t.Errorf("an exec after the first command: %+v", res)
	}

	out := e.createCollected(api.CreateSandboxRequest{Metadata: map[string]string{"k": "v"},
		Exec: &agentapi.ExecRequest{Argv: []string{"python3", "-c", "import sys; print(sys.stdin.read().upper())"}, Stdin: "hello", MaxOutputBytes: 4}})
	if out.Error != nil || out.Result == nil || out.Result.ExitCode != 0 || out.Result.Stdout != "HELL" ||
		!out.Result.StdoutTruncated || out.Result.StdoutBytes != 6 {
		t.Errorf("collected: %+v %+v", out.Result, out.Error)
	}
	if out.Sandbox.Metadata["k"] != "v" {
		t.Errorf("collected: the sandbox %+v", out.Sandbox)
	}

	// A long stdin (over the 1 MiB of a plain create's body) rides along too.
	big := strings.Repeat("x", 1<<20+1)
	out = e.createCollected(api.CreateSandboxRequest{Exec: &agentapi.ExecRequest{Command: "wc -c", Stdin: big}})
	if out.Result == nil || strings.TrimSpace(out.Result.Stdout) != "1048577" {
		t.Errorf("long stdin: %+v %+v", out.Result, out.Error)
	}
}

func TestCreateWithExecCold(t *testing.T) {
	e := newEnv(t)
	checkFirstCommand(t, e)
}

func TestCreateWithExecPooled(t *testing.T) {
	e := newEnv(t, withPool(1))
	e.waitPoolReady(1)
	checkFirstCommandPooled(t, e)
}

// checkFirstCommandPooled is checkFirstCommand with the pool full before
// each create, so that each is a claim.
func checkFirstCommandPooled(t *testing.T, e *env) {
	booted := e.sandboxDirs()
	sb, evs := e.createStream(api.CreateSandboxRequest{Env: map[string]string{"A": "from-create"},
		Exec: &agentapi.ExecRequest{Command: `echo "$A $B"`, Env: map[string]string{"B": "from-exec"}}})
	checkStreamShape(t, "pooled stream", evs)
	if got := strings.Join(outputRuns(evs), "|"); got != "stdout:from-create from-exec\n" {
		t.Errorf("pooled stream output: %q", got)
	}
	if !booted[sb.ID] {
		t.Errorf("the streamed create did not take the pooled sandbox")
	}
	e.waitPoolReady(1)
	booted = e.sandboxDirs()
	out := e.createCollected(api.CreateSandboxRequest{Exec: &agentapi.ExecRequest{Argv: []string{"sh", "-c", "echo $0", "pooled"}}})
	if out.Result == nil || out.Result.Stdout != "pooled\n" {
		t.Errorf("pooled collected: %+v %+v", out.Result, out.Error)
	}
	if !booted[out.Sandbox.ID] {
		t.Errorf("the collected create did not take the pooled sandbox")
	}
}

// sandboxDirs is the set of sandboxes booted on e's host (pooled ones too).
func (e *env) sandboxDirs() map[string]bool {
	entries, _ := os.ReadDir(filepath.Join(e.dataDir, "gvisor", "sandboxes"))
	out := map[string]bool{}
	for _, en := range entries {
		out[en.Name()] = true
	}
	return out
}

// TestCreateWithExecBadInput: a first command the exec route would refuse
// is refused with 400 before anything boots: no record, no sandbox left.
func TestCreateWithExecBadInput(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ body, want string }{
		{`{"exec": {"command": "true", "argv": ["true"]}}`, `exactly one of "command"`},
		{`{"exec": {}}`, `exactly one of "command"`},
		{`{"exec": {"command": "true", "user": "bob"}}`, `user "bob"`},
		{`{"exec": {"command": "true", "timeoutSeconds": -1}}`, `exec.timeoutSeconds`},
		{`{"exec": {"command": "true", "maxOutputBytes": 99999999999}}`, `maxOutputBytes`},
		{`{"exec": {"command": "true", "Cwd": "/"}}`, `case-sensitive`},
		{`{"exec": {"command": "a\u0000b"}}`, `NUL`},
		{`{"exec": {"command": "true", "env": {"A=B": "x"}}}`, `env`},
		{`{"exec": "true"}`, `"exec"`},
		{`{"template": "nope", "exec": {"command": "true"}}`, `nope`},
		{`{"cpu": 99, "exec": {"command": "true"}}`, `cpu`},
		{`{"timeoutSeconds": 3600, "cpu": 2, "maxCostMicros": 1, "exec": {"command": "true"}}`, `maxCostMicros`},
	} {
		status, data := e.do("POST", "/v1/sandboxes", tc.body, "Accept", agentapi.ContentTypeNDJSON)
		var body agentapi.ErrorBody
		_ = json.Unmarshal(data, &body)
		if status != http.StatusBadRequest || !strings.Contains(body.Error.Message, tc.want) {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.body, status, data, tc.want)
		}
	}
	var list api.SandboxList
	e.must(http.StatusOK, "GET", "/v1/sandboxes", nil, &list)
	if len(list.Sandboxes) != 0 {
		t.Errorf("refused creates left records: %+v", list.Sandboxes)
	}
	entries, _ := os.ReadDir(filepath.Join(e.dataDir, "gvisor", "sandboxes"))
	if len(entries) != 0 {
		t.Errorf("refused creates booted sandboxes: %v", entries)
	}
}

// TestCreateWithExecCannotStart: a first command that cannot run leaves a
// running sandbox, and the answer says why, streamed and collected (an
// unknown program, a missing cwd).
func TestCreateWithExecCannotStart(t *testing.T) {
	e := newEnv(t)
	sb, evs := e.createStream(api.CreateSandboxRequest{Exec: &agentapi.ExecRequest{Argv: []string{"no-such-program"}}})
	if len(evs) != 1 || evs[0].Type != "error" || evs[0].Error == nil || !strings.Contains(evs[0].Error.Message, "no-such-program") {
		t.Errorf("stream of a program that does not exist: %+v", evs)
	}
	if got := e.get(sb.ID); got.State != "running" {
		t.Errorf("the sandbox of a command that could not start: %+v", got)
	}
	out := e.createCollected(api.CreateSandboxRequest{Exec: &agentapi.ExecRequest{Command: "true", Cwd: "/nowhere"}})
	if out.Result != nil || out.Error == nil || out.Error.Code != agentapi.CodeBadRequest || !strings.Contains(out.Error.Message, "/nowhere") {
		t.Errorf("collected, missing cwd: %+v %+v", out.Result, out.Error)
	}
	if res := e.sh(out.Sandbox.ID, "echo alive"); res.Stdout != "alive\n" {
		t.Errorf("the sandbox after its first command failed: %+v", res)
	}
}

// TestCLIRunFirstCommand: `sandbox run` sends its command with the create:
// the output and exit code as before, a program that cannot run is told
// (125) and its sandbox destroyed all the same.
func TestCLIRunFirstCommand(t *testing.T) {
	e := newEnv(t)
	if r := e.cli(strings.NewReader("in"), "sandbox", "run", "--", "cat; echo; echo err >&2; exit 7"); r.code != 7 || r.stdout != "in\n" || r.stderr != "err\n" {
		t.Errorf("run: %+v", r)
	}
	if r := e.cli(nil, "sandbox", "run", "--", "no-such-program", "arg"); r.code != 125 || !strings.Contains(r.stderr, "no-such-program") {
		t.Errorf("run of a program that does not exist: %+v", r)
	}
	for _, sb := range e.allSandboxes() {
		if sb.State != "stopped" || sb.EndReason != "deleted" {
			t.Errorf("run left a sandbox: %+v", sb)
		}
	}
	if n := len(e.allSandboxes()); n != 2 {
		t.Errorf("%d sandboxes created, want 2", n)
	}
}

// TestCreateWithExecClientGone: a client that leaves the stream kills the
// first command (as for an exec), not the sandbox.
func TestCreateWithExecClientGone(t *testing.T) {
	e := newEnv(t)
	data, _ := json.Marshal(api.CreateSandboxRequest{Exec: &agentapi.ExecRequest{Command: "echo started; exec sleep 300"}})
	hr, _ := http.NewRequest("POST", e.http.URL+"/v1/sandboxes", bytes.NewReader(data))
	hr.Header.Set("Authorization", "Bearer "+e.key)
	hr.Header.Set("Accept", agentapi.ContentTypeNDJSON)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	var sb api.SandboxEvent
	for sc.Scan() {
		var ev map[string]any
		_ = json.Unmarshal(sc.Bytes(), &ev)
		if ev["type"] == "sandbox" {
			_ = json.Unmarshal(sc.Bytes(), &sb)
		}
		if ev["type"] == "stdout" {
			break
		}
	}
	resp.Body.Close()
	if sb.Sandbox.ID == "" {
		t.Fatal("no sandbox event")
	}
	waitFor(t, 10*time.Second, "the first command to be killed", func() bool {
		return e.sh(sb.Sandbox.ID, "pgrep -x sleep || echo none").Stdout == "none\n"
	})
	if got := e.get(sb.Sandbox.ID); got.State != "running" {
		t.Errorf("the sandbox after its caller left: %+v", got)
	}
}
