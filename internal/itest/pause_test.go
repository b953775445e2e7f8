package itest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/metering"
	"withruntime.dev/runtime/internal/server"
	withruntime "withruntime.dev/runtime/sdk/go"
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

// withStoragePrice prices paused sandboxes' images at micros per GiB-hour.
func withStoragePrice(micros float64) option {
	return func(c *server.Config) {
		p := metering.DefaultPrices()
		p.StorageMicrosPerGiBHour = micros
		c.Metering.Prices = &p
	}
}

// TestLeaseEndPauses: with onLeaseEnd "pause" and a 5 s lease the sandbox
// is paused at its lease end, not stopped. While paused it is billed no
// CPU and no memory, only its image at the storage price; an exec resumes
// it (autoResume is on by default with onLeaseEnd pause) and answers.
func TestLeaseEndPauses(t *testing.T) {
	e := newEnv(t, withMeterInterval(300*time.Millisecond), withStoragePrice(3.6e9)) // 1e6 µ$ per GiB-second
	sb := e.create(api.CreateSandboxRequest{TimeoutSeconds: 5, OnLeaseEnd: "pause"})
	if !sb.AutoResume || sb.OnLeaseEnd != "pause" {
		t.Fatalf("create: %+v, want onLeaseEnd pause with autoResume", sb)
	}
	e.sh(sb.ID, "echo kept > /workspace/f")
	var paused api.Sandbox
	waitFor(t, 20*time.Second, "the lease end to pause the sandbox", func() bool {
		paused = e.get(sb.ID)
		return paused.State != "running"
	})
	if paused.State != "paused" {
		t.Fatalf("at its lease end: %+v, want paused", paused)
	}
	time.Sleep(time.Second) // a sample or more after the pause
	before := e.sandboxRow(sb.ID)
	time.Sleep(2 * time.Second)
	after := e.sandboxRow(sb.ID)
	if after.CPUSeconds != before.CPUSeconds || after.GiBSeconds != before.GiBSeconds || after.BilledCPUSeconds != before.BilledCPUSeconds {
		t.Errorf("billed CPU or memory while paused: before %+v, after %+v", before, after)
	}
	wantStorage := float64(paused.ImageBytes) / (1 << 30) * 2
	// Samples come once a second and may lag on a loaded host: the ledger
	// grows by the image × the time between the two rows' last samples,
	// which is 2 s give or take a sample.
	if grown := after.StorageGiBSeconds - before.StorageGiBSeconds; grown < wantStorage*0.4 || grown > wantStorage*1.8 {
		t.Errorf("storage billed over 2 s paused: %.4f GiB-s, want about %.4f (image %d bytes)", grown, wantStorage, paused.ImageBytes)
	}
	if after.CostMicros <= before.CostMicros {
		t.Errorf("the ledger's cost did not grow with the stored image: %d then %d µ$", before.CostMicros, after.CostMicros)
	}
	res := e.sh(sb.ID, "cat /workspace/f") // resumes it
	if res.Stdout != "kept\n" {
		t.Fatalf("exec on the paused sandbox: %+v", res)
	}
	if got := e.get(sb.ID); got.State != "running" || !got.LeaseEndsAt.After(time.Now()) {
		t.Fatalf("after the exec: %+v, want running with a new lease", got)
	}
}

// TestPauseCycles: five pause/resume cycles in a row on one sandbox, its
// counter going on through all of them.
func TestPauseCycles(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	e.startCounter(sb.ID)
	for i := range 5 {
		e.pause(sb.ID)
		e.resume(sb.ID)
		if got, want := e.count(sb.ID), strconv.Itoa(i+2); got != want {
			t.Fatalf("cycle %d: counter %q, want %q", i+1, got, want)
		}
	}
}

// TestResumedSandboxDeathIsNoticed: a resumed sandbox runs in a new host
// process (runsc restore); when that process dies on its own (killed on
// the host), the server notices without any request and records the
// sandbox failed, as it does for one that was never paused.
func TestResumedSandboxDeathIsNoticed(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	e.pause(sb.ID)
	e.resume(sb.ID)
	pid := sandboxProcess(t, sb.ID)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the sandbox process %d: %v", pid, err)
	}
	waitFor(t, 15*time.Second, "the server to notice the resumed sandbox died", func() bool {
		return e.get(sb.ID).State == "stopped"
	})
	if got := e.get(sb.ID); got.EndReason != "failed" {
		t.Fatalf("record of the killed sandbox: %+v, want stopped with end reason failed", got)
	}
	e.assertGone(sb.ID)
}

// sandboxProcess returns the host pid of sandbox id's runsc-sandbox
// process (gVisor's kernel), found by its command line.
func sandboxProcess(t *testing.T, id string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if args[0] == "runsc-sandbox" && strings.Contains(string(b), "/"+id+"/bundle") {
			pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			if err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no runsc-sandbox process of sandbox %s", id)
	return 0
}

// TestPausedSurvivesRestart: a paused sandbox is listed and resumable by the
// next server on the same data directory, where it was.
func TestPausedSurvivesRestart(t *testing.T) {
	dataDir, err := os.MkdirTemp("/tmp", "wr-pause-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	a := newEnv(t, withDataDir(dataDir))
	sb := a.create(api.CreateSandboxRequest{})
	a.startCounter(sb.ID)
	a.pause(sb.ID)
	a.detach()
	b := newEnv(t, withDataDir(dataDir))
	var list api.SandboxList
	b.must(http.StatusOK, "GET", "/v1/sandboxes?state=paused", nil, &list)
	if len(list.Sandboxes) != 1 || list.Sandboxes[0].ID != sb.ID {
		t.Fatalf("paused sandboxes after the restart: %+v", list.Sandboxes)
	}
	b.resume(sb.ID)
	if got := b.count(sb.ID); got != "2" {
		t.Fatalf("counter after a restart and resume: %q, want 2", got)
	}
}

// TestPauseConcurrently: 8 sandboxes paused at once, then resumed at once;
// each comes back with its own files; nothing is left after they are
// destroyed (the env's leak check: containers, cgroups, namespaces, image
// directories).
func TestPauseConcurrently(t *testing.T) {
	e := newEnv(t)
	const n = 8
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sb := e.create(api.CreateSandboxRequest{MemoryMiB: 256})
			ids[i] = sb.ID
			e.sh(sb.ID, "echo "+sb.ID+" > /workspace/me")
		})
	}
	wg.Wait()
	for _, op := range []string{"pause", "resume"} {
		start := time.Now()
		errs := make([]string, n)
		for i, id := range ids {
			wg.Go(func() {
				if status, data := e.do("POST", "/v1/sandboxes/"+id+"/"+op, nil); status != http.StatusOK {
					errs[i] = fmt.Sprintf("%s %s: %d %s", op, id, status, data)
				}
			})
		}
		wg.Wait()
		for _, msg := range errs {
			if msg != "" {
				t.Error(msg)
			}
		}
		t.Logf("%d sandboxes: %s in %s", n, op, time.Since(start))
	}
	for _, id := range ids {
		if res := e.sh(id, "cat /workspace/me"); res.Stdout != id+"\n" {
			t.Errorf("sandbox %s after resume: %+v", id, res)
		}
	}
}

// TestPauseKeepsNetwork: a resumed sandbox has its network policy (the
// allowed host answers, another is refused) and its secret as before: the
// same placeholder in its environment, the value put on the wire by the
// egress proxy.
func TestPauseKeepsNetwork(t *testing.T) {
	in := newFakeInternet(t)
	e := newEnv(t, withInternet(in))
	const value = "sk-paused-7f3a"
	e.must(http.StatusCreated, "POST", "/v1/secrets", api.CreateSecretRequest{Name: "API_KEY", Value: value, Hosts: []string{inetAPI}}, nil)
	sb := e.create(api.CreateSandboxRequest{Network: &api.NetworkPolicy{Allow: []string{inetAPI}}, Secrets: []string{"API_KEY"}})
	check := func(when string) string {
		t.Helper()
		if seen := sendSecret(e, in, sb.ID); !strings.Contains(seen, "Bearer "+value) {
			t.Errorf("%s: the upstream did not get the secret; it saw:\n%s", when, seen)
		}
		if res := e.sh(sb.ID, curl("http://"+inetOther+"/")); res.Stdout == "200" {
			t.Errorf("%s: a host the policy does not allow answered: %+v", when, res)
		}
		return e.sh(sb.ID, "echo $API_KEY").Stdout
	}
	placeholder := check("before the pause")
	e.pause(sb.ID)
	e.resume(sb.ID)
	if got := check("after the resume"); got != placeholder {
		t.Errorf("the secret's placeholder changed: %q, then %q", placeholder, got)
	}
	var pol api.NetworkPolicy
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+sb.ID+"/network", nil, &pol)
	if len(pol.Allow) != 1 || pol.Allow[0] != inetAPI {
		t.Errorf("policy after the resume: %+v", pol)
	}
}

// TestPauseCLIAndSDK: `withruntime sandbox pause|resume` and `ls` (which
// lists paused sandboxes), and the Go SDK's Pause, ErrPaused and Connect
// (which resumes).
func TestPauseCLIAndSDK(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	e.sh(sb.ID, "echo kept > /workspace/f")
	if r := e.cli(nil, "sandbox", "pause", sb.ID); r.code != 0 || !strings.Contains(r.stdout, sb.ID+" paused") {
		t.Fatalf("sandbox pause: %+v", r)
	}
	if r := e.cli(nil, "sandbox", "ls"); r.code != 0 || !strings.Contains(r.stdout, sb.ID) || !strings.Contains(r.stdout, "paused") {
		t.Errorf("sandbox ls with a paused sandbox: %+v", r)
	}
	if r := e.cli(nil, "sandbox", "pause", sb.ID); r.code == 0 || !strings.Contains(r.stderr, "already paused") {
		t.Errorf("sandbox pause of a paused sandbox: %+v", r)
	}
	if r := e.cli(nil, "sandbox", "resume", "--timeout", "10m", sb.ID); r.code != 0 || !strings.Contains(r.stdout, sb.ID+" running") {
		t.Fatalf("sandbox resume: %+v", r)
	}

	c := e.sdkClient()
	ctx := context.Background()
	sbx, err := c.Connect(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := sbx.Pause(ctx); err != nil || sbx.Info().State != "paused" {
		t.Fatalf("SDK Pause: %v %+v", err, sbx.Info())
	}
	if _, err := sbx.Run(ctx, "true"); !errors.Is(err, withruntime.ErrPaused) {
		t.Errorf("SDK Run on a paused sandbox: %v, want ErrPaused", err)
	}
	again, err := c.Connect(ctx, sb.ID) // resumes it
	if err != nil || again.Info().State != "running" {
		t.Fatalf("SDK Connect to a paused sandbox: %v %+v", err, again.Info())
	}
	if res, err := again.Run(ctx, "cat /workspace/f"); err != nil || res.Stdout != "kept\n" {
		t.Errorf("after Connect: %+v %v", res, err)
	}
}
