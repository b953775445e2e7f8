package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agent"
	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/driver/gvisor"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/internal/template"
)

// outcome is the end of a request that may fail at the transport level.
type outcome struct {
	status int
	body   []byte
	err    error
	took   time.Duration
}

func (o outcome) String() string {
	return fmt.Sprintf("status %d after %s, err %v: %.300s", o.status, o.took.Round(time.Millisecond), o.err, o.body)
}

// try sends a request like do, but reports transport errors instead of
// failing the test, so it can run in a goroutine and against a sandbox
// that dies under it. hdr are header name/value pairs.
func (e *env) try(method, path string, body any, hdr ...string) outcome {
	start := time.Now()
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return outcome{err: err}
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.http.URL+path, r)
	if err != nil {
		return outcome{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+e.key)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return outcome{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return outcome{status: resp.StatusCode, body: b, err: err, took: time.Since(start)}
}

func (e *env) get(id string) api.Sandbox {
	e.t.Helper()
	var sb api.Sandbox
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+id, nil, &sb)
	return sb
}

// waitStopped waits until sandbox id's record says stopped and returns it.
func (e *env) waitStopped(id string, d time.Duration) api.Sandbox {
	e.t.Helper()
	var sb api.Sandbox
	waitFor(e.t, d, "sandbox "+id+" to stop", func() bool {
		sb = e.get(id)
		return sb.State == "stopped"
	})
	return sb
}

// assertGone fails if sandbox id left anything on the host. A stopped
// record may precede the end of the destroy by a moment (the record is
// marked first, so that callers see the sandbox gone at once): allow 2s.
func (e *env) assertGone(id string) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := e.leftovers(id)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Errorf("sandbox %s left on the host: %v", id, left)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// execGone checks that an exec on sandbox id is refused with 410 and code.
func (e *env) execGone(id, code string) {
	e.t.Helper()
	status, body := e.do("POST", "/v1/sandboxes/"+id+"/exec", agentapi.ExecRequest{Command: "true"})
	if status != http.StatusGone || errorCode(e.t, body) != code {
		e.t.Errorf("exec on %s: %d %s, want 410 %s", id, status, body, code)
	}
}

// TestLeaseEndStopsBusySandbox: the lease ends while a background process
// and two foreground execs (collected and streamed) run. The sandbox is
// destroyed on time, the execs return promptly, later calls get 410
// lease_ended, and nothing is left on the host.
func TestLeaseEndStopsBusySandbox(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{TimeoutSeconds: 3})
	var proc agentapi.Process
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+sb.ID+"/processes", agentapi.ExecRequest{Command: "sleep 100"}, &proc)

	execPath := "/v1/sandboxes/" + sb.ID + "/exec"
	long := agentapi.ExecRequest{Command: "sleep 30", TimeoutSeconds: 60}
	collected, streamed := make(chan outcome, 1), make(chan outcome, 1)
	go func() { collected <- e.try("POST", execPath, long) }()
	go func() { streamed <- e.try("POST", execPath, long, "Accept", agentapi.ContentTypeNDJSON) }()

	got := e.waitStopped(sb.ID, time.Until(sb.LeaseEndsAt)+5*time.Second)
	if got.EndReason != "lease_ended" {
		t.Errorf("end reason %q, want lease_ended", got.EndReason)
	}
	if late := got.EndedAt.Sub(sb.LeaseEndsAt); late < 0 || late > 3*time.Second {
		t.Errorf("stopped %s after the lease end", late)
	}
	// Right after the stop, nothing of the sandbox is left on the host.
	stopped := time.Now()
	e.assertGone(sb.ID)
	t.Logf("host clean %s after the record said stopped", time.Since(stopped).Round(time.Millisecond))

	for name, ch := range map[string]chan outcome{"collected": collected, "streamed": streamed} {
		select {
		case o := <-ch:
			t.Logf("%s exec at lease end: %s", name, o)
			if o.err == nil && o.status == http.StatusOK && name == "collected" {
				t.Errorf("collected exec of sleep 30 answered 200 after the lease ended: %s", o)
			}
			if o.status >= 500 && o.status != 0 {
				t.Errorf("%s exec: server error at lease end: %s", name, o)
			}
			if name == "streamed" && o.err == nil && strings.Contains(string(o.body), `"type":"exit"`) &&
				strings.Contains(string(o.body), `"exitCode":0`) {
				t.Errorf("streamed exec of sleep 30 reports success after the lease ended: %s", o)
			}
		case <-time.After(3 * time.Second):
			t.Errorf("%s exec still running 3s after the lease ended", name)
		}
	}
	e.execGone(sb.ID, "lease_ended")
	status, body := e.do("GET", fmt.Sprintf("/v1/sandboxes/%s/processes/%d", sb.ID, proc.Pid), nil)
	if status != http.StatusGone {
		t.Errorf("process after lease end: %d %s", status, body)
	}
}

// TestSetTimeout: extending the lease keeps the sandbox past its original
// end; shortening it ends the sandbox at the new end.
func TestSetTimeout(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{TimeoutSeconds: 2})
	var ext api.Sandbox
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+sb.ID+"/timeout", api.SetTimeoutRequest{TimeoutSeconds: 30}, &ext)
	if d := time.Until(ext.LeaseEndsAt); d < 25*time.Second || d > 31*time.Second {
		t.Fatalf("extended lease ends in %s, want about 30s: %+v", d, ext)
	}
	time.Sleep(time.Until(sb.LeaseEndsAt) + time.Second)
	if res := e.sh(sb.ID, "echo alive"); res.Stdout != "alive\n" {
		t.Fatalf("after the original lease end: %+v", res)
	}
	if got := e.get(sb.ID); got.State != "running" || !got.LeaseEndsAt.Equal(ext.LeaseEndsAt) {
		t.Fatalf("record after the original lease end: %+v", got)
	}

	var short api.Sandbox
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+sb.ID+"/timeout", api.SetTimeoutRequest{TimeoutSeconds: 1}, &short)
	got := e.waitStopped(sb.ID, 4*time.Second)
	if got.EndReason != "lease_ended" {
		t.Fatalf("after shortening: %+v", got)
	}
	if late := got.EndedAt.Sub(short.LeaseEndsAt); late < 0 || late > 3*time.Second {
		t.Errorf("stopped %s after the shortened lease end", late)
	}
	e.assertGone(sb.ID)
	status, body := e.do("POST", "/v1/sandboxes/"+sb.ID+"/timeout", api.SetTimeoutRequest{TimeoutSeconds: 60})
	if status != http.StatusGone || errorCode(t, body) != "lease_ended" {
		t.Errorf("extending a stopped sandbox: %d %s", status, body)
	}
}

// TestRestartAdoptsAndCleansUp: a server closes without destroying its
// sandboxes; the next server on the same data directory adopts the live
// one (its files intact), stops the one whose lease ended meanwhile and the
// one the host killed for memory meanwhile, destroys an orphan no record
// knows, and enforces the adopted leases.
//
// Leases are moved in the store while no server runs, so that the test
// does not depend on how long creates take on a loaded machine.
func TestRestartAdoptsAndCleansUp(t *testing.T) {
	dataDir, err := os.MkdirTemp("/tmp", "wr-restart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })

	a := newEnv(t, withDataDir(dataDir))
	x := a.create(api.CreateSandboxRequest{TimeoutSeconds: 300})
	if res := a.sh(x.ID, "echo before-restart > /workspace/kept"); res.ExitCode != 0 {
		t.Fatalf("write: %+v", res)
	}
	w := a.create(api.CreateSandboxRequest{TimeoutSeconds: 300})
	y := a.create(api.CreateSandboxRequest{TimeoutSeconds: 300})
	orphan := bootOrphan(t, dataDir)
	// v is killed by the host for memory while no server runs.
	v := a.create(api.CreateSandboxRequest{TimeoutSeconds: 300})
	squeezeMemory(t, v.ID, 32<<20)
	a.must(http.StatusCreated, "POST", "/v1/sandboxes/"+v.ID+"/processes",
		agentapi.ExecRequest{Command: `sleep 2; python3 -c "x = bytearray(200 << 20)"`}, nil)
	a.detach()

	for _, id := range []string{x.ID, y.ID, w.ID, orphan} {
		if left := a.leftovers(id); len(left) == 0 {
			t.Fatalf("sandbox %s did not survive the server's close", id)
		}
	}
	waitFor(t, 10*time.Second, "sandbox v to die of its memory hog", func() bool {
		out, _ := exec.Command(runscBin, "--root", filepath.Join(dataDir, "gvisor", "runsc"), "state", v.ID).Output()
		return !strings.Contains(string(out), `"running"`)
	})
	// y's lease ended while no server ran; w's ends after the next start.
	st, err := store.Open(context.Background(), filepath.Join(dataDir, "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	wEnd := now.Add(8 * time.Second)
	if err := st.SetLeaseEnd(context.Background(), y.ID, now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := st.SetLeaseEnd(context.Background(), w.ID, wEnd); err != nil {
		t.Fatal(err)
	}
	st.Close()

	b := newEnv(t, withDataDir(dataDir))
	t.Logf("the next server started in %s", time.Since(now).Round(time.Millisecond))
	if got := b.get(y.ID); got.State != "stopped" || got.EndReason != "lease_ended" {
		t.Errorf("sandbox whose lease ended while no server ran: %+v", got)
	}
	b.assertGone(y.ID)
	b.assertGone(orphan)
	b.execGone(y.ID, "lease_ended")
	if got := b.get(v.ID); got.State != "stopped" || got.EndReason != "out_of_memory" {
		t.Errorf("sandbox killed for memory while no server ran: %+v", got)
	}
	b.assertGone(v.ID)

	if got := b.get(x.ID); got.State != "running" {
		t.Fatalf("adopted sandbox: %+v", got)
	}
	if res := b.sh(x.ID, "cat /workspace/kept"); res.ExitCode != 0 || res.Stdout != "before-restart\n" {
		t.Errorf("file written before the restart: %+v", res)
	}

	if got := b.get(w.ID); got.State != "running" {
		t.Fatalf("sandbox w should still run after the restart (lease ends %s): %+v", wEnd, got)
	}
	got := b.waitStopped(w.ID, time.Until(wEnd)+5*time.Second)
	if got.EndReason != "lease_ended" {
		t.Errorf("adopted sandbox's lease: %+v", got)
	}
	if late := got.EndedAt.Sub(wEnd); late < 0 || late > 3*time.Second {
		t.Errorf("adopted sandbox stopped %s after its lease end", late)
	}
	b.assertGone(w.ID)
}

// bootOrphan starts a sandbox through the driver alone, as a crash between
// boot and record could leave one: runsc runs it but no record knows it.
func bootOrphan(t *testing.T, dataDir string) string {
	t.Helper()
	d, err := gvisor.New(gvisor.Config{Runsc: runscBin, AgentBinary: agentBin, StateDir: filepath.Join(dataDir, "gvisor")})
	if err != nil {
		t.Fatal(err)
	}
	rootfs, err := (&template.Store{Dir: templatesDir}).RootFS("base")
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("sbx_orphan%d", time.Now().UnixNano()%1e9)
	_, err = d.Create(context.Background(), driver.Spec{
		ID: id, RootFS: rootfs, CPU: 1, MemoryBytes: 256 << 20, DiskBytes: 64 << 20, TmpBytes: 64 << 20, PidsLimit: 256,
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestDeleteBusySandbox: DELETE destroys a sandbox with running background
// and foreground commands at once; a second DELETE, and concurrent ones,
// answer 204 too (DELETE is idempotent), never a server error.
func TestDeleteBusySandbox(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	for _, c := range []string{"sleep 100", "while :; do :; done", "sleep 100 & sleep 100 & wait"} {
		e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+sb.ID+"/processes", agentapi.ExecRequest{Command: c}, nil)
	}
	fg := make(chan outcome, 1)
	go func() {
		fg <- e.try("POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{Command: "sleep 30"})
	}()
	time.Sleep(300 * time.Millisecond)

	start := time.Now()
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
	t.Logf("DELETE of a busy sandbox took %s", time.Since(start).Round(time.Millisecond))
	e.assertGone(sb.ID)
	if got := e.get(sb.ID); got.State != "stopped" || got.EndReason != "deleted" {
		t.Errorf("after delete: %+v", got)
	}
	select {
	case o := <-fg:
		t.Logf("foreground exec at delete: %s", o)
		if o.err == nil && (o.status == http.StatusOK || o.status >= 500) {
			t.Errorf("foreground exec at delete: %s", o)
		}
	case <-time.After(3 * time.Second):
		t.Errorf("foreground exec still running 3s after DELETE")
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
	e.execGone(sb.ID, "sandbox_stopped")

	// Concurrent DELETEs of one live sandbox: all 204, destroyed once.
	sb2 := e.create(api.CreateSandboxRequest{})
	var wg sync.WaitGroup
	statuses := make([]outcome, 4)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = e.try("DELETE", "/v1/sandboxes/"+sb2.ID, nil)
		}()
	}
	wg.Wait()
	for _, o := range statuses {
		if o.err != nil || o.status != http.StatusNoContent {
			t.Errorf("concurrent DELETE: %s", o)
		}
	}
	e.assertGone(sb2.ID)
	status, body := e.do("DELETE", "/v1/sandboxes/sbx_doesnotexist", nil)
	if status != http.StatusNotFound {
		t.Errorf("DELETE of an unknown sandbox: %d %s", status, body)
	}
}

// TestLeaseEndsWithNoServer: the agent is the lease's backstop. A sandbox
// whose server is gone (the embedded server of a CLI that exited, a crash)
// ends itself agent.LeaseGrace after its lease end, an extended lease
// moves that end, and the next server records lease_ended and leaves
// nothing behind.
func TestLeaseEndsWithNoServer(t *testing.T) {
	t.Parallel()
	dataDir, err := os.MkdirTemp("/tmp", "wr-nolease-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	a := newEnv(t, withDataDir(dataDir))
	created := time.Now() // no later than the lease start, so the bounds below are never too tight
	short := a.create(api.CreateSandboxRequest{TimeoutSeconds: 2})
	// Created with 1 s, extended to 4 s: the agent must follow the extension.
	extended := a.create(api.CreateSandboxRequest{TimeoutSeconds: 1})
	a.must(http.StatusOK, "POST", "/v1/sandboxes/"+extended.ID+"/timeout", api.SetTimeoutRequest{TimeoutSeconds: 4}, nil)
	a.detach()

	running := func(id string) bool {
		out, _ := exec.Command(runscBin, "--root", filepath.Join(dataDir, "gvisor", "runsc"), "state", id).Output()
		return strings.Contains(string(out), `"running"`)
	}
	waitFor(t, 2*time.Second+agent.LeaseGrace+10*time.Second, "the short sandbox to end itself", func() bool { return !running(short.ID) })
	if d := time.Since(created); d < 2*time.Second+agent.LeaseGrace-time.Second {
		t.Errorf("the sandbox ended %v after its create, before its lease end and the grace", d)
	}
	if d := time.Since(created); d < 4*time.Second+agent.LeaseGrace-time.Second && !running(extended.ID) {
		t.Errorf("the extended sandbox ended at its first lease end")
	}
	waitFor(t, 4*time.Second+agent.LeaseGrace+10*time.Second, "the extended sandbox to end itself", func() bool { return !running(extended.ID) })

	b := newEnv(t, withDataDir(dataDir))
	for _, id := range []string{short.ID, extended.ID} {
		sb := b.get(id)
		if sb.State != "stopped" || sb.EndReason != "lease_ended" {
			t.Errorf("after restart %s is %s (%s), want stopped (lease_ended)", id, sb.State, sb.EndReason)
		}
		if left := b.leftovers(id); len(left) > 0 {
			t.Errorf("after restart %s left %v", id, left)
		}
	}
}
