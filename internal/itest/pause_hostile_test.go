package itest

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/server"
)

// TestPauseEndsRunningExecs: an exec running when the sandbox is paused
// ends at once with 409 sandbox_paused (its command is killed, as when a
// client goes away); a streamed one ends with an error event of that code.
// A background process is saved and runs on after the resume.
func TestPauseEndsRunningExecs(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	var bg agentapi.Process
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+sb.ID+"/processes",
		agentapi.ExecRequest{Command: "while :; do date +%s%N > /tmp/tick; sleep 0.1; done"}, &bg)

	collected := make(chan outcome, 1)
	go func() {
		collected <- e.try("POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{Command: "sleep 60"})
	}()
	req, _ := http.NewRequest("POST", e.http.URL+"/v1/sandboxes/"+sb.ID+"/exec",
		strings.NewReader(`{"command": "for i in $(seq 600); do echo $i; sleep 0.1; done"}`))
	req.Header.Set("Authorization", "Bearer "+e.key)
	req.Header.Set("Accept", agentapi.ContentTypeNDJSON)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan agentapi.Event, 1000)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var ev agentapi.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("stream line %q: %v", sc.Text(), err)
				return
			}
			if ev.Type != agentapi.EventHeartbeat {
				events <- ev
			}
		}
	}()
	time.Sleep(time.Second)
	start := time.Now()
	e.pause(sb.ID)
	select {
	case o := <-collected:
		if o.status != http.StatusConflict || errorCode(t, o.body) != "sandbox_paused" {
			t.Errorf("the exec running at the pause: %s, want 409 sandbox_paused", o)
		}
		t.Logf("the running exec ended %s after the pause began", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("the exec running at the pause did not end")
	}
	var last agentapi.Event
	var lines int
	for ev := range events {
		last = ev
		lines++
	}
	if last.Type != "error" || last.Error == nil || last.Error.Code != "sandbox_paused" {
		t.Errorf("the stream running at the pause ended with %+v after %d events, want an error event sandbox_paused", last, lines)
	}
	e.resume(sb.ID)
	tick := func() string { return e.sh(sb.ID, "cat /tmp/tick").Stdout }
	first := tick()
	time.Sleep(500 * time.Millisecond)
	if tick() == first {
		t.Errorf("the background process does not run after the resume (tick %s)", first)
	}
	// The killed commands are gone: no sleep 60 left.
	if res := e.sh(sb.ID, "pgrep -fx 'sleep 60' || echo none"); res.Stdout != "none\n" {
		t.Errorf("the exec's command outlived the pause: %+v", res)
	}
}

// TestPauseHostDiskFull: when the host's disk has no room for the image,
// the pause fails with 507 no_space and the sandbox runs on untouched;
// with room again it pauses.
func TestPauseHostDiskFull(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	e.sh(sb.ID, "echo still-here > /workspace/f")
	images := filepath.Join(e.dataDir, "gvisor", "sandboxes", sb.ID, "images")
	if err := os.MkdirAll(images, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", images, "tmpfs", 0, "size=8m"); err != nil {
		t.Fatal(err)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			_ = unix.Unmount(images, unix.MNT_DETACH)
		}
	})
	e.expectError(http.StatusInsufficientStorage, "no_space", "POST", "/v1/sandboxes/"+sb.ID+"/pause", nil)
	if got := e.get(sb.ID); got.State != "running" {
		t.Fatalf("after a failed pause: %+v, want running", got)
	}
	if res := e.sh(sb.ID, "cat /workspace/f"); res.Stdout != "still-here\n" {
		t.Fatalf("after a failed pause: %+v", res)
	}
	if err := unix.Unmount(images, 0); err != nil {
		t.Fatal(err)
	}
	mounted = false
	e.pause(sb.ID)
	e.resume(sb.ID)
	if res := e.sh(sb.ID, "cat /workspace/f"); res.Stdout != "still-here\n" {
		t.Fatalf("after pause and resume: %+v", res)
	}
}

// TestPauseHostileRoot: whatever root inside does before a pause, the host
// never follows a path it planted, and the resume either works or fails
// cleanly with the sandbox destroyed and nothing left. Root plants links
// to a host file in its socket directory under the names the host uses
// (images, current, new, checkpoint.img, agent.sock while the agent is
// saved), files named like the image, writes to /proc/gvisor/checkpoint
// (refused), and fills its disk. A socket root binds on the host makes the
// pause fail cleanly (409), the sandbox running on.
func TestPauseHostileRoot(t *testing.T) {
	e := newEnv(t)
	canaryDir := t.TempDir()
	canary := filepath.Join(canaryDir, "canary")
	if err := os.WriteFile(canary, []byte("untouched"), 0o600); err != nil {
		t.Fatal(err)
	}

	sb := e.create(api.CreateSandboxRequest{DiskMiB: 64})
	res := e.rootSh(sb.ID, `cd /run/withruntime &&
		for n in images current new checkpoint.img pages.img; do ln -s `+canary+` $n; done &&
		ln -s `+canaryDir+` dir && mkdir sub && ln -s / sub/root &&
		echo planted > /tmp/checkpoint.img && echo planted > /workspace/pages.img &&
		(echo 1 > /proc/gvisor/checkpoint) 2>/dev/null && echo WROTE-CHECKPOINT;
		dd if=/dev/zero of=/fill bs=1M 2>/dev/null; df -m / | tail -1`)
	if strings.Contains(res.Stdout, "WROTE-CHECKPOINT") {
		t.Errorf("root could write /proc/gvisor/checkpoint: %+v", res)
	}
	// Plants agent.sock as a link the moment the agent lets go of it.
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+sb.ID+"/processes", agentapi.ExecRequest{User: "root",
		Command: `while :; do ln -s ` + canary + ` /run/withruntime/agent.sock 2>/dev/null; sleep 0.001; done`}, nil)

	e.pause(sb.ID)
	status, data := e.do("POST", "/v1/sandboxes/"+sb.ID+"/resume", nil)
	switch status {
	case http.StatusOK:
		if res := e.sh(sb.ID, "ls /run/withruntime; test -e /fill && echo disk-kept"); !strings.Contains(res.Stdout, "disk-kept") {
			t.Errorf("resumed, but: %+v", res)
		}
		e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
	case http.StatusGone:
		if code := errorCode(t, data); code != "sandbox_stopped" {
			t.Errorf("failed resume: %d %s", status, data)
		}
		if got := e.get(sb.ID); got.State != "stopped" || got.EndReason != "failed" {
			t.Errorf("after a failed resume: %+v", got)
		}
	default:
		t.Fatalf("resume: %d %s, want 200 or 410", status, data)
	}
	t.Logf("resume of the hostile sandbox: %d", status)
	e.assertGone(sb.ID)
	if b, err := os.ReadFile(canary); err != nil || string(b) != "untouched" {
		t.Errorf("the host file root linked to: %q %v", b, err)
	}
	if entries, _ := os.ReadDir(canaryDir); len(entries) != 1 {
		t.Errorf("the host directory root linked to holds %d entries, want only the canary", len(entries))
	}

	// A socket bound on the host cannot be saved: the pause is refused and
	// the sandbox runs on; without it, it pauses.
	sb = e.create(api.CreateSandboxRequest{})
	var binder agentapi.Process
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+sb.ID+"/processes", agentapi.ExecRequest{User: "root",
		Command: `python3 -c 'import socket,time; s=socket.socket(socket.AF_UNIX); s.bind("/run/withruntime/evil.sock"); s.listen(); time.sleep(3600)'`}, &binder)
	waitFor(t, 10*time.Second, "the socket to be bound", func() bool {
		return e.rootSh(sb.ID, "test -S /run/withruntime/evil.sock && echo y").Stdout == "y\n"
	})
	e.expectError(http.StatusConflict, "conflict", "POST", "/v1/sandboxes/"+sb.ID+"/pause", nil)
	if got := e.get(sb.ID); got.State != "running" {
		t.Fatalf("after a refused pause: %+v", got)
	}
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+sb.ID+"/processes/"+strconv.Itoa(binder.Pid)+"/kill", agentapi.KillRequest{}, nil)
	e.rootSh(sb.ID, "rm -f /run/withruntime/evil.sock")
	e.pause(sb.ID)
	e.resume(sb.ID)
	e.mustOK(sb.ID)
}

// TestPauseCrash: `withruntime serve` is killed (SIGKILL) at different
// moments of a pause and of a resume. The next server finds the sandbox
// running or paused, as its record says, never lost: it answers, or it
// resumes, and its counter goes on.
func TestPauseCrash(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "wr-pcrash-")
	if err != nil {
		t.Fatal(err)
	}
	var names server.EgressConfig
	server.EgressNames(&names, dir)
	t.Cleanup(func() { sweep(t, dir, names) })
	p := startServe(t, dir)
	sb := p.create(api.CreateSandboxRequest{TimeoutSeconds: 600})
	p.startCounter(sb.ID)
	want := 2
	states := map[string]int{}
	for i, delay := range []time.Duration{150, 50, 250, 350, 450, 600, 100, 200, 300, 500} {
		delay *= time.Millisecond
		op := "pause"
		if p.get(sb.ID).State == "paused" {
			op = "resume"
		}
		if op == "resume" {
			delay = delay * 5 / 2 // a resume takes longer than a pause
		}
		req, _ := http.NewRequest("POST", p.http.URL+"/v1/sandboxes/"+sb.ID+"/"+op, nil)
		req.Header.Set("Authorization", "Bearer "+p.key)
		go func() {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		time.Sleep(delay)
		p.kill()
		p = startServe(t, dir)
		got := p.get(sb.ID)
		t.Logf("round %d: %s killed after %s: the next server says %s", i+1, op, delay, got.State)
		states[op+" -> "+got.State]++
		switch got.State {
		case "running":
			if got := p.count(sb.ID); got != strconv.Itoa(want) {
				t.Fatalf("round %d: counter %q, want %d", i+1, got, want)
			}
			want++
		case "paused": // the next round resumes it
			if exec.Command(runscBin, "--root", filepath.Join(dir, "gvisor", "runsc"), "state", sb.ID).Run() == nil {
				t.Errorf("round %d: the record says paused but a runsc container %s exists", i+1, sb.ID)
			}
		default:
			t.Fatalf("round %d: after the crash the sandbox is %+v, want running or paused", i+1, got)
		}
	}
	if p.get(sb.ID).State == "paused" {
		p.resume(sb.ID)
	}
	if got := p.count(sb.ID); got != strconv.Itoa(want) {
		t.Fatalf("at the end: counter %q, want %d", got, want)
	}
	t.Logf("outcomes: %v", states)
	p.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
	p.assertGone(sb.ID)
	p.stop()
}
