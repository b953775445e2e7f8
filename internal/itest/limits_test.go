package itest

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/sandbox"
)

// TestMemoryLimit: a command that allocates past the sandbox's memory never
// gets the memory. Either it fails inside (MemoryError, or the agent kills
// it) and the sandbox lives on, or the host kills the whole sandbox (gVisor
// has no OOM killer of its own): then the server notices at once, records
// out_of_memory, answers 410 and cleans up. The server and a neighbour are
// unaffected either way.
func TestMemoryLimit(t *testing.T) {
	e := newEnv(t)
	victim := e.create(api.CreateSandboxRequest{MemoryMiB: 256})
	neighbour := e.create(api.CreateSandboxRequest{MemoryMiB: 256})

	o := e.try("POST", "/v1/sandboxes/"+victim.ID+"/exec",
		agentapi.ExecRequest{Command: `python3 -c "x=bytearray(1024*1024*1024); print('got', len(x))"`, TimeoutSeconds: 60})
	t.Logf("1 GiB allocation in a 256 MiB sandbox: %s", o)
	if o.err != nil {
		t.Fatalf("exec: %s", o)
	}
	switch o.status {
	case http.StatusOK:
		var res agentapi.ExecResult
		if err := json.Unmarshal(o.body, &res); err != nil {
			t.Fatal(err)
		}
		if res.ExitCode == 0 || strings.Contains(res.Stdout, "got") {
			t.Fatalf("the allocation succeeded: %+v", res)
		}
		if !strings.Contains(res.Stderr, "MemoryError") && !res.OOMKilled {
			t.Errorf("failed, but not for memory: %+v", res)
		}
		if res := e.sh(victim.ID, "echo ok"); res.Stdout != "ok\n" {
			t.Errorf("the sandbox after the failed allocation: %+v", res)
		}
	case http.StatusGone:
		e.assertDiedOfMemory(victim.ID, o)
	default:
		t.Fatalf("exec: %s", o)
	}
	e.must(http.StatusOK, "GET", "/v1/health", nil, nil)
	if res := e.sh(neighbour.ID, "echo ok"); res.Stdout != "ok\n" {
		t.Errorf("neighbour: %+v", res)
	}
}

// TestHostMemoryKillIsNoticed: when the host kills a whole sandbox for
// memory (here forced by squeezing its host limit, so that the agent's own
// out-of-memory handling cannot step in first), the server notices without
// waiting for the lease: the exec in flight and later calls get 410
// sandbox_stopped saying out of memory, the record says out_of_memory, and
// nothing is left on the host.
func TestHostMemoryKillIsNoticed(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	squeezeMemory(t, sb.ID, 32<<20)
	o := e.try("POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{Command: `python3 -c "x = bytearray(200 << 20)"`})
	t.Logf("200 MiB allocation over the squeezed host limit: %s", o)
	if o.err != nil || o.status != http.StatusGone {
		t.Fatalf("exec in a sandbox the host killed: %s", o)
	}
	if o.took > 5*time.Second {
		t.Errorf("the exec took %s to fail", o.took)
	}
	e.assertDiedOfMemory(sb.ID, o)
}

// assertDiedOfMemory checks the aftermath of a host out-of-memory kill of
// sandbox id, given the answer of the exec in flight.
func (e *env) assertDiedOfMemory(id string, o outcome) {
	e.t.Helper()
	if code := errorCode(e.t, o.body); code != "sandbox_stopped" || !strings.Contains(string(o.body), "out of memory") {
		e.t.Errorf("exec killed with the sandbox: %s", o)
	}
	if got := e.get(id); got.State != "stopped" || got.EndReason != "out_of_memory" {
		e.t.Errorf("record of the killed sandbox: %+v", got)
	}
	e.assertGone(id)
	e.execGone(id, "sandbox_stopped")
}

// squeezeMemory lowers sandbox id's host memory limit to its current use
// plus extra bytes, as if the host limit were tight.
func squeezeMemory(t *testing.T, id string, extra int64) {
	t.Helper()
	for _, c := range []struct{ usage, limit string }{
		{"/sys/fs/cgroup/memory/withruntime/" + id + "/memory.usage_in_bytes", "memory.limit_in_bytes"}, // v1
		{"/sys/fs/cgroup/withruntime/" + id + "/memory.current", "memory.max"},                          // v2
	} {
		b, err := os.ReadFile(c.usage)
		if err != nil {
			continue
		}
		used, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(c.usage), c.limit), []byte(strconv.FormatInt(used+extra, 10)), 0); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no memory cgroup found for sandbox %s", id)
}

// TestDiskLimit: the root filesystem's writes are capped by diskMiB. A huge
// fallocate fails at once with ENOSPC without touching the host's disk; the
// sandbox works on; filling the cap fails cleanly and freeing space lets
// writes succeed again. /tmp has its own cap.
func TestDiskLimit(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{DiskMiB: 64})

	before := freeBytes(t, e.dataDir)
	start := time.Now()
	res := e.sh(sb.ID, "fallocate -l 100G /workspace/big")
	took := time.Since(start)
	after := freeBytes(t, e.dataDir)
	t.Logf("fallocate 100G: exit %d in %s, %q; host free space %+d MiB", res.ExitCode, took.Round(time.Millisecond), res.Stderr, (after-before)>>20)
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left on device") {
		t.Fatalf("fallocate 100G: %+v", res)
	}
	if took > 5*time.Second {
		t.Errorf("fallocate took %s to fail", took)
	}
	if d := before - after; d > 256<<20 || d < -(256<<20) {
		t.Errorf("host free space moved by %d MiB", d>>20)
	}
	if res := e.sh(sb.ID, "echo ok"); res.Stdout != "ok\n" {
		t.Fatalf("after fallocate: %+v", res)
	}

	res = e.sh(sb.ID, "dd if=/dev/zero of=/workspace/fill bs=1M count=200")
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left on device") {
		t.Fatalf("filling the disk: %+v", res)
	}
	res = e.sh(sb.ID, "echo x > /workspace/small")
	t.Logf("write with the disk full: %+v", res)
	res = e.sh(sb.ID, "rm /workspace/fill && dd if=/dev/zero of=/workspace/again bs=1M count=32 2>&1 && echo written")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "written") {
		t.Fatalf("writing after rm: %+v", res)
	}

	res = e.sh(sb.ID, "fallocate -l 10G /tmp/big")
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left on device") {
		t.Errorf("fallocate 10G in /tmp: %+v", res)
	}
	if res := e.sh(sb.ID, "echo ok > /tmp/ok && cat /tmp/ok"); res.Stdout != "ok\n" {
		t.Errorf("/tmp after fallocate: %+v", res)
	}
}

// TestDiskWritesAreNotMemory: the disk cap can exceed the memory size, and
// filling the disk must not count as memory (a memory-backed overlay would
// get the whole sandbox killed for writing a file).
func TestDiskWritesAreNotMemory(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{MemoryMiB: 128, DiskMiB: 1024})
	start := time.Now()
	o := e.try("POST", "/v1/sandboxes/"+sb.ID+"/exec",
		agentapi.ExecRequest{Command: "dd if=/dev/zero of=/workspace/f bs=1M count=400 2>&1 && sync && cat /proc/meminfo | head -3"})
	t.Logf("writing 400 MiB in a 128 MiB sandbox: %s", o)
	if o.err != nil || o.status != http.StatusOK {
		t.Fatalf("write: %s (after %s)", o, time.Since(start))
	}
	var res agentapi.ExecResult
	_ = json.Unmarshal(o.body, &res)
	if res.ExitCode != 0 {
		t.Fatalf("write: %+v", res)
	}
	if res := e.sh(sb.ID, "stat -c %s /workspace/f"); res.Stdout != "419430400\n" {
		t.Errorf("file size: %+v", res)
	}
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// forkCount forks children (each becomes a small sleep, so memory is not
// what runs out) until fork fails or 2000, reports how many it got, then
// kills them.
const forkCount = `
import os, signal
kids = []
err = None
try:
    for i in range(2000):
        pid = os.fork()
        if pid == 0:
            os.closerange(0, 3)
            os.execv("/bin/sleep", ["sleep", "60"])
        kids.append(pid)
except OSError as e:
    err = e.strerror
print(len(kids), err, flush=True)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
for pid in kids:
    os.waitpid(pid, 0)
`

// TestProcessLimit: a sandbox's user cannot have more processes than the
// server's PidsLimit, and a fork bomb takes down neither the host nor the
// sandbox: the sandbox, its neighbour and the server keep answering, and the
// bomb can be killed.
func TestProcessLimit(t *testing.T) {
	// Below the agent's fork-bomb threshold (64 processes in a 512 MiB
	// sandbox), so that RLIMIT_NPROC is what refuses the forks here.
	const limit = 40
	e := newEnv(t, withLimits(func(l *sandbox.Limits) { l.PidsLimit = limit }))
	sb := e.create(api.CreateSandboxRequest{})
	neighbour := e.create(api.CreateSandboxRequest{})

	// The cap is the server's limit, or what the sandbox's memory can hold
	// (4 MiB of memory size per process, see mibPerProcess) if that is less.
	small := e.create(api.CreateSandboxRequest{MemoryMiB: 128})
	for id, want := range map[string]string{sb.ID: "40", small.ID: "32"} {
		if res := e.sh(id, "ulimit -u"); strings.TrimSpace(res.Stdout) != want {
			t.Errorf("ulimit -u: %+v, want %s", res, want)
		}
	}

	res := e.exec(sb.ID, agentapi.ExecRequest{Argv: []string{"python3", "-c", forkCount}, TimeoutSeconds: 60})
	t.Logf("fork until refused: %+v", res)
	n, _ := strconv.Atoi(strings.Fields(res.Stdout + " 0")[0])
	if n == 0 || n > limit || !strings.Contains(res.Stdout, "Resource temporarily unavailable") {
		t.Errorf("forked %d children with a limit of %d: %+v", n, limit, res)
	}

	// The bomb's first shell returns at once; its children fork on in the
	// background (the agent leaves a finished command's background
	// processes running), capped by the limit.
	o := e.try("POST", "/v1/sandboxes/"+sb.ID+"/exec", agentapi.ExecRequest{Command: ":(){ :|:& };:", TimeoutSeconds: 5})
	t.Logf("fork bomb: %s", o)
	if o.err != nil || o.status != http.StatusOK {
		t.Fatalf("fork bomb: %s", o)
	}
	time.Sleep(2 * time.Second)
	count := func() int {
		res := e.exec(sb.ID, agentapi.ExecRequest{Command: "ps -e --no-headers | wc -l", User: "root"})
		n, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
		if err != nil {
			t.Fatalf("counting processes: %+v", res)
		}
		return n
	}
	during := count()
	t.Logf("processes during the bomb: %d", during)
	if during > 2*limit {
		t.Errorf("%d processes with a limit of %d per user", during, limit)
	}
	e.must(http.StatusOK, "GET", "/v1/health", nil, nil)
	if res := e.sh(neighbour.ID, "echo ok"); res.Stdout != "ok\n" {
		t.Errorf("neighbour during the fork bomb: %+v", res)
	}
	// kill -1 signals every process of the user but the caller; bash
	// builtins only, as the user can fork nothing more.
	waitFor(t, 10*time.Second, "the fork bomb to be killed", func() bool {
		e.sh(sb.ID, "kill -9 -1; kill -9 -1; kill -9 -1")
		return count() < 10
	})
	if res := e.sh(sb.ID, "echo ok"); res.Stdout != "ok\n" {
		t.Errorf("sandbox after the fork bomb: %+v", res)
	}
	if got := e.get(sb.ID); got.State != "running" {
		t.Errorf("sandbox after the fork bomb: %+v", got)
	}
}

// TestTmpFitsMemory: /tmp (a tmpfs, whose pages are the sandbox's memory)
// is at most half the sandbox's memory, so filling it is ENOSPC for the
// command, not the host killing the whole sandbox.
func TestTmpFitsMemory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{MemoryMiB: 128})
	res := e.sh(sb.ID, "df -m /tmp | tail -1; head -c 100M /dev/zero > /tmp/fill")
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left on device") || res.OOMKilled {
		t.Fatalf("filling /tmp of a 128 MiB sandbox: %+v", res)
	}
	if f := strings.Fields(res.Stdout); len(f) < 2 || f[1] != "64" {
		t.Errorf("/tmp of a 128 MiB sandbox: %q, want 64 MiB", res.Stdout)
	}
	if res := e.sh(sb.ID, "rm /tmp/fill; echo alive"); res.Stdout != "alive\n" {
		t.Fatalf("after /tmp was full: %+v", res)
	}
}
