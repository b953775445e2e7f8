package agent

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// newGuardedAgent serves an agent whose guard watches a fake memory gauge
// (used bytes of a 1 GiB sandbox, settable through the returned pointer) and
// sees only the processes of the agent's own commands, so it can never
// touch anything else on the host. Stopping "every other process" is a
// no-op.
func newGuardedAgent(t *testing.T) (*testAgent, *atomic.Int64) {
	t.Helper()
	srv, err := New(Config{User: currentUser(t), Workspace: t.TempDir(), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var used atomic.Int64
	g := srv.guard
	g.on = true
	g.readMem = func() (int64, int64, error) { return 1<<30 + 64<<20, 1<<30 + 64<<20 - used.Load(), nil }
	g.setMemory(1 << 30)
	g.pidsTrigger = 30
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
	return newClientAgent(t, sock, srv.cfg.Workspace), &used
}

// The largest command is killed when memory reaches the sandbox's size and
// its result says so; a small command beside it is left alone.
func TestGuardKillsLargestForMemory(t *testing.T) {
	t.Parallel()
	a, used := newGuardedAgent(t)
	var small agentapi.Process
	a.call("POST", "/processes", agentapi.ExecRequest{Command: "sleep 30"}, http.StatusCreated, &small)
	resc := make(chan agentapi.ExecResult)
	go func() {
		resc <- a.exec(agentapi.ExecRequest{Command: `python3 -c "x = bytearray(64 << 20); print('big', flush=True); import time; time.sleep(30)"`})
	}()
	eventually(t, 10*time.Second, "the big command to start", func() bool { return len(procsMatching("bytearray(64")) > 0 })
	time.Sleep(300 * time.Millisecond) // let it touch its memory
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
	var p agentapi.Process
	a.call("GET", "/processes/"+strconv.Itoa(small.Pid), nil, http.StatusOK, &p)
	if !p.Running {
		t.Errorf("the small command was killed too: %+v", p)
	}
	a.call("POST", "/processes/"+strconv.Itoa(small.Pid)+"/kill", nil, http.StatusOK, nil)
}

// Nothing is killed below the limit, nor for memory that no command holds.
func TestGuardLeavesSmallCommands(t *testing.T) {
	t.Parallel()
	a, used := newGuardedAgent(t)
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
	a, _ := newGuardedAgent(t)
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

func TestVictim(t *testing.T) {
	units := []*unit{
		{root: 10, pids: make([]int, 3), rss: 100 << 20, tasks: 3},
		{root: 20, pids: make([]int, 40), rss: 50 << 20, tasks: 40},
		{root: 30, pids: make([]int, 1), rss: 1 << 20, tasks: 60},
	}
	if v := victim(units, byMemory); v == nil || v.root != 10 {
		t.Errorf("by memory: %+v", v)
	}
	if v := victim(units, byProcs); v == nil || v.root != 30 {
		t.Errorf("by processes: %+v", v)
	}
	if v := victim([]*unit{{root: 1, rss: 1 << 20, tasks: 3}}, byMemory); v != nil {
		t.Errorf("too small to kill for memory: %+v", v)
	}
	if v := victim([]*unit{{root: 1, rss: 1 << 20, tasks: 3}}, byProcs); v != nil {
		t.Errorf("too few processes to kill: %+v", v)
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
	g := &guard{memLimit: 1 << 30}
	if d := g.interval(0); d != guardMaxInterval {
		t.Errorf("far from the limit: %v", d)
	}
	if d := g.interval(1<<30 - 1<<20); d != guardMinInterval {
		t.Errorf("at the limit: %v", d)
	}
	if d := g.interval(1<<30 - 200<<20); d <= guardMinInterval || d >= guardMaxInterval {
		t.Errorf("200 MiB below: %v", d)
	}
}
