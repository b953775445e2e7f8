package agent

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// hostPidsHierarchy is where a host with cgroup v1 mounts its pids
// hierarchy, as gVisor does inside a sandbox (see cgroupRoot).
const hostPidsHierarchy = "/sys/fs/cgroup/pids"

// cgroupAgent serves an agent whose per-command cgroups live under a fresh
// cgroup of the host's pids hierarchy that the whole test process is moved
// into, as the agent is in a sandbox. It needs root and cgroup v1 pids.
func cgroupAgent(t *testing.T) (*testAgent, string) {
	t.Helper()
	cgs := testCgroups(t)
	return newTestAgentWith(t, Config{}, func(s *Server) { s.cgroups = cgs }), cgs.root
}

// testCgroups moves the test process into a fresh cgroup of the host's pids
// hierarchy (see cgroupAgent) and opens the per-command cgroups there.
func testCgroups(t *testing.T) *cgroups {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("per-command cgroups need root")
	}
	if _, err := os.Stat(filepath.Join(hostPidsHierarchy, "tasks")); err != nil {
		t.Skipf("per-command cgroups need a cgroup v1 pids hierarchy at %s: %v", hostPidsHierarchy, err)
	}
	home, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	orig := ""
	for line := range strings.SplitSeq(string(home), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && f[1] == "pids" {
			orig = filepath.Join(hostPidsHierarchy, f[2])
		}
	}
	if orig == "" {
		t.Skip("this process is in no pids cgroup")
	}
	root := filepath.Join(orig, fmt.Sprintf("agent-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Skipf("cannot create a test cgroup: %v", err)
	}
	if err := writeCgroupFile(filepath.Join(root, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
		os.Remove(root)
		t.Fatalf("moving the test into %s: %v", root, err)
	}
	t.Cleanup(func() {
		if err := writeCgroupFile(filepath.Join(orig, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
			t.Errorf("moving the test back to %s: %v", orig, err)
		}
		// Whatever is left (a failed test's daemons) is killed.
		subs, _ := filepath.Glob(filepath.Join(root, "cmd-*"))
		for _, d := range append(subs, root) {
			cg := &cgroup{dir: d}
			cg.signal(syscall.SIGKILL)
			eventually(t, 2*time.Second, "empty "+d, func() bool { return len(cg.procs()) == 0 })
			if d != root {
				os.Remove(d)
			}
		}
		if err := os.Remove(root); err != nil {
			t.Errorf("removing the test cgroup: %v", err)
		}
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cgs := openCgroups(log, root)
	if cgs == nil {
		t.Fatal("openCgroups refused a cgroup that holds the agent")
	}
	return cgs
}

// daemonPid reads the pid a daemon wrote to file.
func daemonPid(t *testing.T, file string) int {
	t.Helper()
	var pid int
	eventually(t, 10*time.Second, "the daemon to write its pid", func() bool {
		data, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil && pid > 0
	})
	return pid
}

// dead reports whether pid is gone or a zombie.
func dead(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	e, ok := parseStat(pid, data)
	return ok && (e.state == 'Z' || e.state == 'X')
}

// C22: a timeout ends what the command started, daemons that left its
// session and parent (setsid -f, double forks with setsid, env -i) too.
func TestTimeoutKillsDaemons(t *testing.T) {
	a, _ := cgroupAgent(t)
	for _, c := range []struct{ name, command, trace string }{
		{"setsid -f", "setsid -f sleep 1201; sleep 5", "sleep 1201"},
		{"env -i", "env -i /usr/bin/setsid -f /bin/sleep 1202; sleep 5", "sleep 1202"},
		{"shell double fork", "( setsid sleep 1203 & ); sleep 5", "sleep 1203"},
		{"python double fork", `python3 -c '
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execlp("sleep", "sleep", "1204")
    os._exit(0)
os.wait()
time.sleep(5)'`, "sleep 1204"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t0 := time.Now()
			res := a.exec(agentapi.ExecRequest{Command: c.command, TimeoutSeconds: 1})
			took := time.Since(t0)
			if !res.TimedOut || res.ExitCode != agentapi.TimeoutExitCode || took > 3*time.Second {
				t.Errorf("result %+v after %v, want a timeout (124) after about 1 s", res, took)
			}
			noProcs(t, 2*time.Second, c.trace)
		})
	}
}

// C22 and C05: killing a background process whose main process has
// already exited still ends the daemon it started; a daemon of an earlier
// call survives another call's timeout.
func TestKillReachesDaemonsOnlyOfItsCommand(t *testing.T) {
	a, _ := cgroupAgent(t)
	dir := t.TempDir()
	earlier := filepath.Join(dir, "earlier")
	res := a.exec(agentapi.ExecRequest{Command: fmt.Sprintf(`setsid -f sh -c 'echo $$ > %s; exec sleep 1211'`, earlier)})
	if res.ExitCode != 0 {
		t.Fatalf("starting a daemon: %+v", res)
	}
	survivor := daemonPid(t, earlier)
	t.Cleanup(func() { _ = syscall.Kill(survivor, syscall.SIGKILL) })

	bgFile := filepath.Join(dir, "bg")
	var p agentapi.Process
	a.call("POST", "/processes", agentapi.ExecRequest{Command: fmt.Sprintf(`setsid -f sh -c 'echo $$ > %s; exec sleep 1212'`, bgFile)}, http.StatusCreated, &p)
	var done agentapi.ExecResult
	a.call("POST", fmt.Sprintf("/processes/%d/wait?timeoutSeconds=5", p.Pid), nil, http.StatusOK, &done)
	if done.ExitCode != 0 {
		t.Fatalf("background setsid -f: %+v", done)
	}
	daemon := daemonPid(t, bgFile)

	res = a.exec(agentapi.ExecRequest{Command: "sleep 5", TimeoutSeconds: 0.5})
	if !res.TimedOut {
		t.Fatalf("unrelated call: %+v, want a timeout", res)
	}
	if dead(survivor) || dead(daemon) {
		t.Fatalf("an unrelated timeout killed daemons of other calls (earlier dead: %v, background dead: %v)", dead(survivor), dead(daemon))
	}

	a.call("POST", fmt.Sprintf("/processes/%d/kill", p.Pid), nil, http.StatusOK, &p)
	eventually(t, 2*time.Second, "the background process's daemon to die at its kill", func() bool { return dead(daemon) })
	if dead(survivor) {
		t.Errorf("killing one background process killed another call's daemon")
	}
}

// A command's cgroup is removed when it is done, or once its last daemon
// has ended; nothing piles up.
func TestCgroupsRemoved(t *testing.T) {
	a, root := cgroupAgent(t)
	for range 5 {
		a.exec(agentapi.ExecRequest{Command: "true"})
	}
	res := a.exec(agentapi.ExecRequest{Command: "setsid -f sleep 0.3"})
	if res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	time.Sleep(sweepEvery + 500*time.Millisecond)
	a.exec(agentapi.ExecRequest{Command: "true"}) // sweeps
	// One empty cgroup stays, made ahead for the next command.
	eventually(t, 2*time.Second, "every command cgroup but the next removed", func() bool {
		left, _ := filepath.Glob(filepath.Join(root, "cmd-*"))
		return len(left) == 1 && len((&cgroup{dir: left[0]}).procs()) == 0
	})
}

// A command whose cgroup cannot be entered runs without one, and the
// forking thread never stays in a command's cgroup.
func TestStartInFallsBack(t *testing.T) {
	cgs := testCgroups(t)
	cg, err := cgs.create()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(cg.dir); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	contained, err := cgs.startIn(cg, cmd.Start)
	if contained || err != nil {
		t.Fatalf("start in a removed cgroup: contained %v, err %v; want it started without one", contained, err)
	}
	_ = cmd.Wait()

	cg, err = cgs.create()
	if err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command("sleep", "10")
	if contained, err = cgs.startIn(cg, cmd.Start); !contained || err != nil {
		t.Fatalf("start: contained %v, err %v", contained, err)
	}
	if got := cg.procs(); !slices.Equal(got, []int{cmd.Process.Pid}) {
		t.Errorf("cgroup holds %v, want only the command %d", got, cmd.Process.Pid)
	}
	cg.signal(syscall.SIGKILL)
	_ = cmd.Wait()
	cgs.release(cg)
	if _, err := os.Stat(cg.dir); err == nil {
		t.Errorf("an empty cgroup was kept")
	}
}

// The guard counts a daemon that left a running command's session and
// parent as the command's (it is in its cgroup): killing for memory kills
// the command, which is reported as out of memory.
func TestGuardUnitsIncludeCgroup(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("100\n200\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &proc{pid: 100, exited: make(chan struct{}), done: make(chan struct{}), cg: &cgroup{dir: dir}}
	g := &guard{live: newLiveSet()}
	g.live.add(p)
	defer close(p.done)
	units := g.units([]procEntry{
		{pid: 100, ppid: 1, pgid: 100, sid: 100, state: 'S', rssPages: 1},
		{pid: 200, ppid: 1, pgid: 200, sid: 200, state: 'S', rssPages: 1000}, // setsid -f daemon
	})
	if len(units) != 1 || units[0].p != p || !slices.Equal(units[0].pids, []int{100, 200}) {
		for _, u := range units {
			t.Logf("unit root %d pids %v running %v", u.root, u.pids, u.p != nil)
		}
		t.Fatalf("want one unit, the command with its daemon")
	}
	if c, ok := memoryVictim(units, growthSample{}, time.Now(), bySizeNoSample); ok && c.u.p != p {
		t.Errorf("victim %+v, want the command", c.u)
	}
}

// writeCgroupFile writes one value to a cgroup control file (tests).
func writeCgroupFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
