package agent

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// startIn starts a shell command as a tracked command of live.
func startIn(t *testing.T, live *liveSet, command string) *proc {
	t.Helper()
	p, err := startProc(procSpec{path: "/bin/sh", args: []string{"sh", "-c", command}, dir: t.TempDir(),
		env: os.Environ()}, newCollectSink(1<<10), nil)
	if err != nil {
		t.Fatal(err)
	}
	live.add(p)
	t.Cleanup(func() { p.signal(syscall.SIGKILL); <-p.done })
	return p
}

// A pipeline whose two ends sit idle beside bytes in the pipe between them
// is woken, then stopped and continued at the next look, then left alone
// for a doubling pause. An idle pipeline with an empty pipe (the shape of
// sudo and its monitor, or `sleep | cat`) is never stopped; nor is a busy
// one, or a lone idle process.
func TestKickerKicksIdlePipelines(t *testing.T) {
	t.Parallel()
	live := newLiveSet()
	full := startIn(t, live, "yes | sleep 30") // yes fills the pipe and sleeps
	empty := startIn(t, live, "sleep 31 | cat")
	startIn(t, live, "yes | cat >/dev/null")
	startIn(t, live, "sleep 32")
	time.Sleep(300 * time.Millisecond) // let the pipelines start
	k := newKicker(slog.New(slog.DiscardHandler), live)
	var kicked [][]int
	k.kick = func(pids []int) { kicked = append(kicked, slices.Sorted(slices.Values(pids))) }
	peeked := map[string][]int{}
	k.peek = func(path string) (int, error) {
		n, err := peekPipe(path)
		if err != nil {
			t.Errorf("peek %s: %v", path, err)
		}
		peeked[path] = append(peeked[path], n)
		return n, err
	}
	base := full.started.Add(stallAfter)
	for i := range 9 { // seconds after the commands could first stall
		k.check(base.Add(time.Duration(i) * time.Second))
		time.Sleep(300 * time.Millisecond) // busy processes use CPU between checks
	}
	// Idle since +0, woken at +2, kicked at +4, then paused 4 s: woken
	// again at +8 (and kicked at +10 were it still asleep).
	if len(kicked) != 1 {
		t.Fatalf("kicks: %v, want the full pipeline once (peeks: %v)", kicked, peeked)
	}
	for _, pids := range kicked {
		if len(pids) != 3 {
			t.Errorf("kicked %v, want the whole command: sh, yes and sleep", pids)
		}
		for _, pid := range pids {
			if !slices.Contains(treeOf(scanProcs(), full.pid), pid) {
				t.Errorf("kicked %d, not of the full pipeline (the empty one is %v)", pid, treeOf(scanProcs(), empty.pid))
			}
		}
	}
	// Both were looked at, and peeking took nothing out of the pipe.
	var sawEmpty, sawFull bool
	for _, ns := range peeked {
		for _, n := range ns {
			sawEmpty = sawEmpty || n == 0
			sawFull = sawFull || n >= 4096
		}
		if len(ns) != 3 && len(ns) != 2 {
			t.Errorf("peeks %v: want the full pipe's at +2, +4, +8 and the empty one's at +2, +4", peeked)
		}
	}
	if !sawEmpty || !sawFull {
		t.Errorf("peeks %v: want an empty pipe and a full one", peeked)
	}
}

// statCache sees what scanProcs sees, and keeps up with processes coming
// and going.
func TestStatCache(t *testing.T) {
	t.Parallel()
	c := newStatCache()
	defer c.close()
	find := func(pid int) (procEntry, bool) {
		for _, e := range c.scan() {
			if e.pid == pid {
				return e, true
			}
		}
		return procEntry{}, false
	}
	if e, ok := find(os.Getpid()); !ok || e.ppid != os.Getppid() || e.threads < 1 {
		t.Fatalf("own entry: %+v %v", e, ok)
	}
	live := newLiveSet()
	p := startIn(t, live, "sleep 30")
	if _, ok := find(p.pid); !ok {
		t.Fatalf("started process %d not seen", p.pid)
	}
	p.signal(syscall.SIGKILL)
	<-p.done
	if e, ok := find(p.pid); ok {
		t.Errorf("killed and reaped process %d still seen: %+v", p.pid, e)
	}
}

// sudoLike behaves as sudo does without a terminal: when its child stops,
// it stops itself (sudo_suspend_parent). Its child, sleep, writes to a
// pipe that the parent reads: an idle pipeline of the parent and child.
const sudoLike = `
import os, signal, subprocess, sys
p = subprocess.Popen(["sleep", "30"], stdout=subprocess.PIPE)
def onchld(sig, frame):
    pid, status = os.waitpid(p.pid, os.WUNTRACED | os.WNOHANG)
    if pid and os.WIFSTOPPED(status):
        os.kill(os.getpid(), signal.SIGSTOP)
signal.signal(signal.SIGCHLD, onchld)
open(sys.argv[1], "w").close()  # ready: the handler is in place
p.stdout.read()
`

// A kick stops and continues the whole command, parents first, so that a
// parent which stops itself when it sees its child stopped (sudo, a
// job-control shell) never sees it. Stopping only the pair on the pipe
// leaves such a parent stopped for good (the control, below).
func TestKickerLeavesParentsRunning(t *testing.T) {
	t.Parallel()
	stopped := func(pid int) bool {
		for _, e := range scanProcs() {
			if e.pid == pid {
				return e.state == 'T' || e.state == 't'
			}
		}
		return false
	}
	live := newLiveSet()
	// start runs the sudo-like parent and returns it and its child once
	// its handler is in place.
	start := func() (int, int) {
		ready := filepath.Join(t.TempDir(), "ready")
		p := startIn(t, live, "exec python3 -c '"+sudoLike+"' "+ready)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the sudo-like parent never got ready")
			}
		}
		for _, e := range scanProcs() {
			if e.ppid == p.pid {
				return p.pid, e.pid
			}
		}
		t.Fatal("the sudo-like parent has no child")
		return 0, 0
	}
	const hold = 300 * time.Millisecond // time enough for a parent to look

	parent, child := start()
	byPid := map[int]procEntry{}
	procs := scanProcs()
	for _, e := range procs {
		byPid[e.pid] = e
	}
	order := parentsFirst(treeOf(procs, parent), byPid)
	if !slices.Equal(order, []int{parent, child}) {
		t.Fatalf("order %v, want parent %d then child %d", order, parent, child)
	}
	stopAndContinue(order, hold)
	time.Sleep(time.Second)
	if stopped(parent) || stopped(child) {
		t.Errorf("after a kick of the whole command: parent stopped %v, child stopped %v", stopped(parent), stopped(child))
	}

	// The control: the child alone stopped, as the kicker once did: the
	// parent stops itself.
	parent, child = start()
	_ = syscall.Kill(child, syscall.SIGSTOP)
	for deadline := time.Now().Add(30 * time.Second); !stopped(parent) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(child, syscall.SIGCONT)
	if !stopped(parent) {
		t.Errorf("with its child stopped the sudo-like parent did not stop itself: the test shows nothing")
	}
	_ = syscall.Kill(parent, syscall.SIGCONT)
}

// peekPipe reads a pipe's waiting bytes without taking them, and refuses
// what a hostile process may have put at the descriptor instead of a pipe.
func TestPeekPipe(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := w.Write([]byte("12345")); err != nil {
		t.Fatal(err)
	}
	path := "/proc/self/fd/" + strconv.Itoa(int(r.Fd()))
	if n, err := peekPipe(path); n != 5 || err != nil {
		t.Fatalf("peek: %d %v, want 5 bytes", n, err)
	}
	buf := make([]byte, 10)
	if n, _ := r.Read(buf); string(buf[:n]) != "12345" {
		t.Errorf("after the peek the pipe holds %q", buf[:n])
	}
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{f, "/dev/null"} {
		if _, err := peekPipe(p); err == nil {
			t.Errorf("peek %s: no error, want one (not a pipe)", p)
		}
	}
}
