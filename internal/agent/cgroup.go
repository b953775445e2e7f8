package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Each command runs in a cgroup of its own, so that a timeout or a kill
// reaches everything it started: daemons that called setsid and were
// re-parented to PID 1 included, whatever their environment, session or
// parent. A process cannot leave its cgroup unless it may write the
// cgroup files (root-owned: commands run as the sandbox user cannot);
// every child it forks starts in it.
//
// The cgroups are directories of the sandbox's pids hierarchy, which the
// driver mounts at /sys/fs/cgroup/pids (gVisor's own cgroupfs, v1; the
// agent's cgroup is that mount's root). A command is born in its cgroup:
// the agent moves the one thread that forks it there first (cgroup v1
// places threads one by one through "tasks"), forks, and moves the thread
// back, so the command runs nothing before it is contained. cgroup v1 has
// no atomic kill (cgroup.kill) and gVisor does not enforce pids.max for
// every fork, so a kill stops every member, reads the list again until
// nothing new appears (a stopped process cannot fork), and then kills them.

// cgroupRoot is where the driver mounts the sandbox's pids hierarchy.
const cgroupRoot = "/sys/fs/cgroup/pids"

// Bounds of a cgroup kill.
const (
	// killRounds bounds the rounds of reading cgroup.procs while stopping
	// or killing a cgroup's members.
	killRounds = 200
	// sweepEvery is how often cgroups of finished commands that still
	// held processes (daemons) are tried again for removal.
	sweepEvery = time.Second
)

// cgroups makes and removes the per-command cgroups under root, whose
// cgroup the agent itself is in. Under gVisor opening a cgroup file costs
// about half a millisecond, writing to an open one microseconds: the
// agent's own tasks file stays open, and the next command's cgroup is made
// (and its tasks file opened) ahead of time, off the exec path.
type cgroups struct {
	root      string
	rootTasks *os.File // root's tasks file, where forking threads return
	log       *slog.Logger

	mu        sync.Mutex
	seq       uint64
	next      *cgroup  // made ahead for the next command, or nil
	making    bool     // a goroutine is making next
	lingering []string // cgroups of finished commands, removed once empty
	lastSweep time.Time
}

// openCgroups returns the per-command cgroups of root, or nil when they
// cannot be used: when the driver mounted no pids hierarchy whose root
// cgroup holds the agent. Commands then fall back to their process group
// and session. Never call it on a host's own cgroups.
func openCgroups(log *slog.Logger, root string) *cgroups {
	data, err := os.ReadFile(filepath.Join(root, "cgroup.procs"))
	if err != nil {
		log.Warn("no per-command cgroups: a timeout or kill reaches a command's process group, session and descendants only",
			"cgroupRoot", root, "err", err)
		return nil
	}
	if !slices.Contains(parsePids(data), os.Getpid()) {
		log.Warn("no per-command cgroups: the agent is not in the root cgroup of the pids hierarchy", "cgroupRoot", root)
		return nil
	}
	tasks, err := os.OpenFile(filepath.Join(root, "tasks"), os.O_WRONLY, 0)
	if err != nil {
		log.Warn("no per-command cgroups", "cgroupRoot", root, "err", err)
		return nil
	}
	c := &cgroups{root: root, rootTasks: tasks, log: log}
	c.mu.Lock()
	c.makeAheadLocked()
	c.mu.Unlock()
	return c
}

// cgroup is one command's cgroup directory.
type cgroup struct {
	dir   string
	tasks *os.File // open until the command has started in it
}

// create returns a new, empty cgroup for one command: the one made ahead,
// or a fresh one if that is taken or not ready yet.
func (c *cgroups) create() (*cgroup, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cg := c.next
	c.next = nil
	c.makeAheadLocked()
	if cg != nil {
		return cg, nil
	}
	return c.makeLocked()
}

// makeAheadLocked makes the next cgroup in the background.
func (c *cgroups) makeAheadLocked() {
	if c.making || c.next != nil {
		return
	}
	c.making = true
	go func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.making = false
		if cg, err := c.makeLocked(); err == nil {
			c.next = cg
		}
	}()
}

// makeLocked makes a cgroup and opens its tasks file.
func (c *cgroups) makeLocked() (*cgroup, error) {
	for range 1000 {
		c.seq++
		dir := filepath.Join(c.root, "cmd-"+strconv.FormatUint(c.seq, 10))
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		// Opened with a plain open(2): os.OpenFile would also try the
		// poller, four more traps under gVisor for each command.
		fd, err := syscall.Open(filepath.Join(dir, "tasks"), syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			os.Remove(dir)
			return nil, fmt.Errorf("open %s/tasks: %w", dir, err)
		}
		return &cgroup{dir: dir, tasks: os.NewFile(uintptr(fd), filepath.Join(dir, "tasks"))}, nil
	}
	return nil, fmt.Errorf("create cgroup under %s: every name taken", c.root)
}

// startIn runs start, which forks a command, so that the command is born
// in cg, and reports whether it was. The fork runs on a thread of its own
// that is moved into cg for the fork only; should it fail to move back, the
// thread ends with its goroutine (the runtime ends a locked thread whose
// goroutine exits), so no later fork of the agent can land in cg. If the
// thread cannot enter cg, start runs uncontained and contained is false.
func (c *cgroups) startIn(cg *cgroup, start func() error) (contained bool, err error) {
	type result struct {
		contained bool
		err       error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		tid := []byte(strconv.Itoa(syscall.Gettid()))
		if _, err := cg.tasks.WriteAt(tid, 0); err != nil {
			runtime.UnlockOSThread()
			c.log.Warn("cannot enter a command's cgroup; the command runs without one", "cgroup", cg.dir, "err", err)
			done <- result{false, start()}
			return
		}
		err := start()
		if _, berr := c.rootTasks.WriteAt(tid, 0); berr != nil {
			c.log.Error("cannot move a thread back to the agent's cgroup; ending the thread", "cgroup", cg.dir, "err", berr)
			done <- result{true, err}
			return // still locked: the thread ends with this goroutine
		}
		runtime.UnlockOSThread()
		done <- result{true, err}
	}()
	r := <-done
	cg.tasks.Close()
	return r.contained, r.err
}

// release removes cg once its command is done, or keeps it until its last
// process (a daemon the command left) has ended. Empty cgroups released
// earlier are swept at most every sweepEvery.
func (c *cgroups) release(cg *cgroup) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cg.tasks.Close() // in case it never started
	if os.Remove(cg.dir) != nil {
		c.lingering = append(c.lingering, cg.dir)
	}
	c.sweepLocked()
}

// sweep removes the lingering cgroups that have become empty.
func (c *cgroups) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweepLocked()
}

func (c *cgroups) sweepLocked() {
	if len(c.lingering) == 0 || time.Since(c.lastSweep) < sweepEvery {
		return
	}
	c.lastSweep = time.Now()
	c.lingering = slices.DeleteFunc(c.lingering, func(dir string) bool {
		err := os.Remove(dir)
		return err == nil || errors.Is(err, fs.ErrNotExist)
	})
}

// procs lists the processes in cg (none once it is removed), never PID 1
// or the agent, which root inside could have moved there.
func (cg *cgroup) procs() []int {
	data, err := os.ReadFile(filepath.Join(cg.dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	self := os.Getpid()
	return slices.DeleteFunc(parsePids(data), func(pid int) bool { return pid <= 1 || pid == self })
}

// signal sends sig to every process in cg. For SIGKILL every member is
// first stopped, and the list read again until no new member appears, so
// nothing can fork a child between the last read and the kill; then the
// list is read again until it holds nothing new, for children whose fork
// was under way.
func (cg *cgroup) signal(sig syscall.Signal) {
	if sig != syscall.SIGKILL {
		for _, pid := range cg.procs() {
			_ = syscall.Kill(pid, sig)
		}
		return
	}
	seen := map[int]bool{}
	grow := func(send syscall.Signal) bool {
		grew := false
		for _, pid := range cg.procs() {
			if !seen[pid] {
				seen[pid] = true
				grew = true
				_ = syscall.Kill(pid, send)
			}
		}
		return grew
	}
	for i := 0; i < killRounds; i++ {
		if !grow(syscall.SIGSTOP) {
			break
		}
	}
	for pid := range seen {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	quiet := 0
	for i := 0; i < killRounds && quiet < 2; i++ {
		if grow(syscall.SIGKILL) {
			quiet = 0
			continue
		}
		quiet++
		time.Sleep(time.Millisecond)
	}
}

// parsePids parses a cgroup.procs file: one pid a line.
func parsePids(data []byte) []int {
	var out []int
	for f := range strings.FieldsSeq(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out
}
