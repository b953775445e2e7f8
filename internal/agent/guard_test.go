package agent

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// newGuardedAgent serves an agent whose guard watches a fake memory gauge
// (bytes held of a 1 GiB sandbox and bytes in use that nothing holds, the
// memory gVisor is still releasing, settable through the returned
// pointers) and
// sees only the processes of the agent's own commands, so it can never
// touch anything else on the host. Stopping "every other process" is a
// no-op.
func newGuardedAgent(t *testing.T) (a *testAgent, held, releasing *atomic.Int64) {
	t.Helper()
	srv, err := New(Config{User: currentUser(t), Workspace: t.TempDir(), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	held, releasing = new(atomic.Int64), new(atomic.Int64)
	g := srv.guard
	g.on = true
	g.readMem = func() (memReading, error) {
		h := held.Load()
		return memReading{total: 1<<30 + 512<<20, used: h + releasing.Load(), held: h}, nil
	}
	g.setMemory(1 << 30)
	g.pidsLimit, g.pidsTrigger = 33, 30
	g.stopOthers = func(bool) {}
	var mu sync.Mutex
	ours := map[int]bool{} // sessions of every command started, finished or not
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			mu.Lock()
			for _, p := range srv.live.list() {
				ours[p.pid] = true
			}
			mu.Unlock()
		}
	}()
	g.scan = func() []procEntry {
		mu.Lock()
		defer mu.Unlock()
		var out []procEntry
		for _, e := range scanProcs() {
			if ours[e.sid] {
				out = append(out, e)
			}
		}
		return out
	}
	g.countProcs = func() int { // alive ones: on a host nobody may reap our orphans
		n := 0
		for _, e := range g.scan() {
			if e.state != 'Z' {
				n++
			}
		}
		return n
	}

	sock := filepath.Join(shortTempDir(t), "agent.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return newClientAgent(t, sock, srv.cfg.Workspace), held, releasing
}

// The largest command is killed when memory reaches the sandbox's size
// with no earlier sample to measure growth from (the guard got no CPU
// while memory grew past memWatchPercent to the limit), and its result
// says so; a small command beside it is left alone.
func TestGuardKillsLargestForMemory(t *testing.T) {
	t.Parallel()
	a, used, _ := newGuardedAgent(t)
	var small agentapi.Process
	a.call("POST", "/processes", agentapi.ExecRequest{Command: "sleep 30"}, http.StatusCreated, &small)
	dir := t.TempDir()
	resc := make(chan agentapi.ExecResult)
	go func() {
		resc <- a.exec(agentapi.ExecRequest{Cwd: dir,
			Command: `python3 -c "x = bytearray(64 << 20); open('big', 'w'); import time; time.sleep(30)"`})
	}()
	eventually(t, 10*time.Second, "the big command to hold its memory", func() bool {
		_, err := os.Stat(filepath.Join(dir, "big"))
		return err == nil
	})
	used.Store(1<<30 + 1)
	var res agentapi.ExecResult
	select {
	case res = <-resc:
	case <-time.After(10 * time.Second):
		t.Fatal("the big command was not killed")
	}
	used.Store(0)
	if !res.OOMKilled || res.ExitCode != 137 || res.Signal != "SIGKILL" {
		t.Errorf("killed command: %+v", res)
	}
	if !strings.Contains(res.Stderr, "withruntime: out of memory: killed this command, which held the most memory, ") ||
		!strings.Contains(res.Stderr, "before the agent could see which command grew") {
		t.Errorf("the killed command's stderr does not say why: %q", res.Stderr)
	}
	var p agentapi.Process
	a.call("GET", "/processes/"+strconv.Itoa(small.Pid), nil, http.StatusOK, &p)
	if !p.Running {
		t.Errorf("the small command was killed too: %+v", p)
	}
	a.call("POST", "/processes/"+strconv.Itoa(small.Pid)+"/kill", nil, http.StatusOK, nil)
}

// The command whose growth takes the sandbox over the limit is killed, not
// a larger one that has held its memory all along; its stderr ends with
// the guard's reason, after its own output.
func TestGuardKillsTheGrowingCommand(t *testing.T) {
	t.Parallel()
	a, used, _ := newGuardedAgent(t)
	dir := t.TempDir()
	exists := func(name string) func() bool {
		return func() bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil }
	}
	var steady agentapi.Process
	a.call("POST", "/processes", agentapi.ExecRequest{Cwd: dir,
		Command: `python3 -c "x = bytearray(64 << 20); open('steady', 'w'); import time; time.sleep(30)"`}, http.StatusCreated, &steady)
	eventually(t, 10*time.Second, "the steady command to hold its memory", exists("steady"))
	resc := make(chan agentapi.ExecResult)
	go func() {
		resc <- a.exec(agentapi.ExecRequest{Cwd: dir, Command: `python3 -c "
import os, sys, time
print('waiting', file=sys.stderr, flush=True)
open('waiting', 'w')
while not os.path.exists('go'):
    time.sleep(0.01)
x = bytearray(40 << 20)
print('grown', flush=True)
open('grown', 'w')
time.sleep(30)"`})
	}()
	eventually(t, 10*time.Second, "the growing command to start", exists("waiting"))
	used.Store(600 << 20)              // over memWatchPercent: the guard notes what each command holds
	time.Sleep(600 * time.Millisecond) // samples of both before it grows
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the command to grow", exists("grown"))
	used.Store(1<<30 + 1)
	var res agentapi.ExecResult
	select {
	case res = <-resc:
	case <-time.After(10 * time.Second):
		t.Fatal("the growing command was not killed")
	}
	used.Store(0)
	if !res.OOMKilled || res.ExitCode != 137 || res.Stdout != "grown\n" {
		t.Errorf("growing command: %+v", res)
	}
	if !strings.HasPrefix(res.Stderr, "waiting\nwithruntime: out of memory: killed this command, which grew by ") ||
		!strings.HasSuffix(res.Stderr, "when the sandbox reached its memory limit of 1024 MiB\n") || res.StderrBytes != int64(len("waiting\n")) {
		t.Errorf("stderr %q (%d bytes counted): want the command's own, then why it was killed", res.Stderr, res.StderrBytes)
	}
	var p agentapi.Process
	a.call("GET", "/processes/"+strconv.Itoa(steady.Pid), nil, http.StatusOK, &p)
	if !p.Running {
		t.Errorf("the steady command was killed: %+v", p)
	}
	a.call("POST", "/processes/"+strconv.Itoa(steady.Pid)+"/kill", nil, http.StatusOK, nil)
}

// A SIGKILL the agent did not send, while the memory is full, is the host's
// OOM killer: the result says oomKilled and the stderr says so, also when a
// shell reports its child's death as exit status 137.
func TestGuardReportsOutsideKillWhileFull(t *testing.T) {
	t.Parallel()
	a, used, _ := newGuardedAgent(t)
	used.Store(1<<30 - 1<<20) // at memFullPercent, under the limit: the guard kills nothing
	for _, cmd := range []string{"echo started >&2; kill -9 $$", "sh -c 'kill -9 $$'; exit $?"} {
		res := a.exec(agentapi.ExecRequest{Command: cmd})
		if !res.OOMKilled || res.ExitCode != 137 || !strings.Contains(res.Stderr, "killed (SIGKILL) from outside the agent") {
			t.Errorf("%s: %+v", cmd, res)
		}
	}
	used.Store(0)
	time.Sleep(memFullRecent)
	if res := a.exec(agentapi.ExecRequest{Command: "kill -9 $$"}); res.OOMKilled || res.Stderr != "" {
		t.Errorf("killed with the memory not full: %+v", res)
	}
}

// Memory in use that no command holds (gVisor still releasing a dead
// command's pages) gets no command killed, even at the emergency level:
// killing frees nothing sooner. A command that grows meanwhile is killed.
func TestGuardWaitsForReleasedMemory(t *testing.T) {
	t.Parallel()
	a, held, releasing := newGuardedAgent(t)
	dir := t.TempDir()
	var steady agentapi.Process
	a.call("POST", "/processes", agentapi.ExecRequest{Cwd: dir,
		Command: `python3 -c "x = bytearray(64 << 20); open('steady', 'w'); import time; time.sleep(30)"`}, http.StatusCreated, &steady)
	eventually(t, 10*time.Second, "the steady command to hold its memory", func() bool {
		_, err := os.Stat(filepath.Join(dir, "steady"))
		return err == nil
	})
	held.Store(80 << 20)
	releasing.Store(1<<30 + 300<<20) // past the emergency level (1280 MiB)
	time.Sleep(memSustain + 500*time.Millisecond)
	var p agentapi.Process
	a.call("GET", "/processes/"+strconv.Itoa(steady.Pid), nil, http.StatusOK, &p)
	if !p.Running {
		t.Fatalf("a command was killed for memory that nothing holds: %+v", p)
	}
	res := a.exec(agentapi.ExecRequest{Command: `python3 -c "x = bytearray(40 << 20); import time; time.sleep(30)"`})
	if !res.OOMKilled || !strings.Contains(res.Stderr, "which grew by") {
		t.Errorf("the command that grew at the emergency level: %+v", res)
	}
	releasing.Store(0)
	a.call("GET", "/processes/"+strconv.Itoa(steady.Pid), nil, http.StatusOK, &p)
	if !p.Running {
		t.Errorf("the steady command was killed: %+v", p)
	}
	a.call("POST", "/processes/"+strconv.Itoa(steady.Pid)+"/kill", nil, http.StatusOK, nil)
}

// Nothing is killed below the limit, nor for memory that no command holds.
func TestGuardLeavesSmallCommands(t *testing.T) {
	t.Parallel()
	a, used, _ := newGuardedAgent(t)
	used.Store(1<<30 + 1) // over the limit, but only sleeps run: too small to kill
	res := a.exec(agentapi.ExecRequest{Command: "sleep 0.5; echo done"})
	if res.ExitCode != 0 || res.Stdout != "done\n" || res.OOMKilled {
		t.Errorf("small command: %+v", res)
	}
}

// When the sandbox stays at its process limit, the command with the most
// processes is killed whole, also after its main process has exited (the
// shell's fork bomb returns at once).
func TestGuardKillsAtProcessLimit(t *testing.T) {
	t.Parallel()
	a, _, _ := newGuardedAgent(t)
	res := a.exec(agentapi.ExecRequest{Command: "for i in $(seq 40); do sleep 1201 & done; echo started"})
	if res.Stdout != "started\n" {
		t.Fatalf("start: %+v", res)
	}
	noProcs(t, 5*time.Second, "sleep 1201")
	// Fewer processes are left alone.
	a.exec(agentapi.ExecRequest{Command: "for i in $(seq 20); do sleep 1202 & done"})
	time.Sleep(2 * time.Second)
	if n := len(procsMatching("sleep 1202")); n != 20 {
		t.Errorf("%d of 20 sleeps left", n)
	}
	a.exec(agentapi.ExecRequest{Command: "pkill -f 'sleep 1202'; true"})
}

func TestMemoryVictim(t *testing.T) {
	now := time.Now()
	units := []*unit{
		{root: 10, rss: 600 << 20}, // steady, the largest
		{root: 20, rss: 300 << 20}, // grew by 200 MiB
		{root: 30, rss: 40 << 20},  // new since the reference
		{root: 40, rss: 8 << 20},   // new, too small to matter
	}
	ref := growthSample{at: now.Add(-time.Second), rss: map[int]int64{10: 600 << 20, 20: 100 << 20}}
	if c, ok := memoryVictim(units, ref, now, bySizeNone); !ok || c.u.root != 20 || c.grew != 200<<20 || c.over != time.Second {
		t.Errorf("by growth: %+v", c)
	}
	if c, ok := memoryVictim(units, ref, now, bySizeSustained); !ok || c.u.root != 10 || c.bySize != bySizeSustained {
		t.Errorf("by size: %+v", c)
	}
	steady := growthSample{at: ref.at, rss: map[int]int64{10: 600 << 20, 20: 300 << 20, 30: 35 << 20}}
	if c, ok := memoryVictim(units, steady, now, bySizeNone); ok {
		t.Errorf("nothing grew by memMinGrowth, yet %+v", c)
	}
	if c, ok := memoryVictim([]*unit{{root: 1, rss: 1 << 20}}, growthSample{}, now, bySizeNoSample); ok {
		t.Errorf("too small to kill for memory: %+v", c)
	}
}

func TestProcsVictim(t *testing.T) {
	g := &guard{pidsLimit: 100}
	units := []*unit{{root: 10, tasks: 3}, {root: 20, tasks: 40}, {root: 30, tasks: 60, top: procEntry{comm: "python3"}}}
	if u, note, ok := g.procsVictim(units); !ok || u.root != 30 || !strings.Contains(note, "60 (pid 30 python3 first)") {
		t.Errorf("by processes: %+v %q", u, note)
	}
	if u, _, ok := g.procsVictim([]*unit{{root: 1, tasks: 3}}); ok {
		t.Errorf("too few processes to kill: %+v", u)
	}
}

// The growth log keeps the newest sample at least memGrowthWindow old, the
// reference, and every later one.
func TestGrowthLog(t *testing.T) {
	var l growthLog
	if _, ok := l.reference(); ok {
		t.Fatal("a reference in an empty log")
	}
	t0 := time.Now()
	for i := range 10 {
		l.add(t0.Add(time.Duration(i)*300*time.Millisecond), []*unit{{root: 1, rss: int64(i)}})
	}
	// Samples at 0, 300, ... 2700 ms: 1500 ms is the newest a second old at 2700.
	ref, _ := l.reference()
	if ref.rss[1] != 5 || len(l.samples) != 5 {
		t.Errorf("reference %+v of %d samples", ref, len(l.samples))
	}
	l.reset()
	if _, ok := l.reference(); ok {
		t.Error("a reference after reset")
	}
}

func TestParseMeminfo(t *testing.T) {
	m := parseMeminfo([]byte("MemTotal:         589824 kB\nMemFree:          474488 kB\nMemAvailable:     474488 kB\n" +
		"AnonPages:         2048 kB\nMapped:            1024 kB\nShmem:                0 kB\n"))
	if m.total != 589824<<10 || m.used != 115336<<10 || m.held != 3072<<10 {
		t.Errorf("%+v", m)
	}
	if m := parseMeminfo([]byte("MemTotal: 2048 kB\nMemFree: 1024 kB\n")); m.used != 1024<<10 || m.held != m.used {
		t.Errorf("without AnonPages and Mapped: %+v", m)
	}
}

func TestUnitsGroupLeftoversBySession(t *testing.T) {
	g := &guard{live: newLiveSet()}
	self := os.Getpid()
	procs := []procEntry{
		{pid: 1, sid: 1},
		{pid: self, ppid: 1, sid: 1, pgid: 1},
		{pid: 100, ppid: 1, sid: 100, pgid: 100, rssPages: 10},
		{pid: 101, ppid: 1, sid: 100, pgid: 100, rssPages: 5, threads: 4},
		{pid: 200, ppid: 1, sid: 200, pgid: 201},
	}
	us := g.units(procs)
	if len(us) != 2 {
		t.Fatalf("units: %+v", us)
	}
	for _, u := range us {
		switch u.root {
		case 100:
			if len(u.pids) != 2 || u.tasks != 5 || !u.group || u.rss != 15*int64(os.Getpagesize()) {
				t.Errorf("session 100: %+v", u)
			}
		case 200:
			if len(u.pids) != 1 || u.group {
				t.Errorf("session 200: %+v", u)
			}
		default:
			t.Errorf("unexpected unit %+v", u)
		}
	}
}

func TestGuardInterval(t *testing.T) {
	g := &guard{}
	g.memLimit.Store(1 << 30)
	g.memEmergency.Store(1<<30 + 256<<20)
	at := func(held, used int64) time.Duration { return g.interval(memReading{held: held, used: used}) }
	if d := at(0, 0); d != guardMaxInterval {
		t.Errorf("far from the limit: %v", d)
	}
	if d := at(1<<30-1<<20, 1<<30-1<<20); d != guardMinInterval {
		t.Errorf("at the limit: %v", d)
	}
	if d := at(1<<30-200<<20, 1<<30-200<<20); d <= guardMinInterval || d >= guardMaxInterval {
		t.Errorf("200 MiB below: %v", d)
	}
	if d := at(0, 1<<30+255<<20); d != guardMinInterval {
		t.Errorf("held low, but in use at the emergency level: %v", d)
	}
}
