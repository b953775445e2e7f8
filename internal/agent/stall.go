package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The kicker works around a lost wakeup in gVisor's pipes (reported
// upstream as google/gvisor#10046, "xxx | grep > /dev/null" hanging): now
// and then, more often under load, a pipeline such as
//
//	seq 1 200000 | grep -x 5 >/dev/null
//
// stops for good with both ends asleep on the pipe between them. Measured
// here in 2026-11: about one run in a few hundred under load (none in
// 1,600 under load with the runsc of 2026-12); SIGCONT alone does not help,
// SIGSTOP then SIGCONT does, as both blocked system calls restart and find
// the pipe as it is.
//
// So every stallTick the agent looks at the processes of its running
// commands (through /proc files kept open, see statCache: this costs well
// under 1% of a CPU). When two processes that share a pipe (not one of the
// agent's own output pipes) have both used no CPU for stallAfter, it opens
// that pipe through /proc and reads how many bytes wait in it (peekPipe).
//   - None: most likely both ends wait for more input, as an idle pipeline
//     does (`sleep 100 | cat`, sudo and its monitor). The close of the
//     descriptor the agent opened still wakes the pipe's waiters (below),
//     and nothing more is done: the one stall that leaves the pipe empty,
//     a writer that missed the wakeup after the reader drained the pipe,
//     gets that wakeup and no stop.
//   - Some: closing the descriptor it opened wakes every waiter on the pipe
//     (a spurious wakeup for a healthy one: it looks and sleeps again). If
//     the pair is still asleep beside the bytes at its next look, their
//     command is stopped and continued (stopAndContinue).
//
// Stopping a command is the last resort because a parent that watches its
// child with WUNTRACED sees it (sudo stops itself then; see
// stopAndContinue): once stopped for every idle pipe, `sudo apt-get update`
// ended with exit 129 now and then in CI. A pipe is looked at again only
// after a doubling pause (up to stallMaxBackoff), so it is disturbed
// rarely.
type kicker struct {
	log  *slog.Logger
	live *liveSet
	// wake is signalled when a command starts; while none runs the kicker
	// sleeps, so an idle sandbox costs no wakeups.
	wake chan struct{}

	// idle tracks each process's CPU time: since when it has not changed.
	idle map[int]idleState
	// next is when a pipe may be looked at again, the pause after that,
	// and whether it was found asleep beside bytes last time.
	next map[string]backoff

	// Sources and actions, replaceable in tests.
	scan  func() []procEntry
	pipes func(pid int) []pipeRef
	peek  func(path string) (int, error)
	kick  func(pids []int)
}

// pipeRef is one pipe a process holds: its name ("pipe:[123]", the same
// for every holder) and a path that opens it (/proc/PID/fd/N).
type pipeRef struct{ name, path string }

type idleState struct {
	start uint64 // the process's start time: a reused pid is another process
	cpu   int64
	since time.Time
}

type backoff struct {
	at    time.Time
	pause time.Duration
	woken bool // its waiters were woken at the last look, with bytes waiting
}

const (
	stallTick       = 2 * time.Second
	stallAfter      = 2 * time.Second
	stallMaxBackoff = time.Minute
)

func newKicker(log *slog.Logger, live *liveSet) *kicker {
	return &kicker{log: log, live: live, wake: make(chan struct{}, 1), idle: map[int]idleState{}, next: map[string]backoff{},
		scan: newStatCache().scan, pipes: pipesOf, peek: peekPipe, kick: func(order []int) { stopAndContinue(order, 0) }}
}

// run kicks stalled pipelines until ctx is done: every stallTick while a
// command runs, not at all while none does.
func (k *kicker) run(ctx context.Context) {
	t := time.NewTimer(stallTick)
	defer t.Stop()
	for {
		if !k.anyRunning() {
			clear(k.idle)
			select {
			case <-ctx.Done():
				return
			case <-k.wake:
			}
			t.Reset(stallTick)
		}
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			k.check(now)
			t.Reset(stallTick)
		case <-k.wake:
		}
	}
}

// anyRunning reports whether some command's main process still runs.
func (k *kicker) anyRunning() bool {
	for _, p := range k.live.list() {
		select {
		case <-p.exited:
		default:
			return true
		}
	}
	return false
}

// check looks once at the running commands' processes.
func (k *kicker) check(now time.Time) {
	var roots []int
	for _, p := range k.live.list() {
		select {
		case <-p.exited:
		default:
			if now.Sub(p.started) >= stallAfter {
				roots = append(roots, p.pid)
			}
		}
	}
	if len(roots) == 0 {
		clear(k.idle)
		return
	}
	procs := k.scan()
	byPid := make(map[int]procEntry, len(procs))
	for _, e := range procs {
		byPid[e.pid] = e
	}
	seen := map[int]bool{}
	holders := map[string][]int{} // pipe inode -> idle processes holding it
	trees := map[string][]int{}   // pipe inode -> the command it is in
	paths := map[string]string{}  // pipe inode -> a path that opens it
	for _, root := range roots {
		tree := treeOf(procs, root)
		for _, pid := range tree {
			e, ok := byPid[pid]
			if !ok || seen[pid] || e.state == 'Z' {
				continue
			}
			seen[pid] = true
			st, ok := k.idle[pid]
			if !ok || st.start != e.start || st.cpu != e.cpuTicks {
				k.idle[pid] = idleState{start: e.start, cpu: e.cpuTicks, since: now}
				continue
			}
			if now.Sub(st.since) < stallAfter {
				continue
			}
			for _, pipe := range k.pipes(pid) {
				holders[pipe.name] = append(holders[pipe.name], pid)
				trees[pipe.name] = tree
				paths[pipe.name] = pipe.path
			}
		}
	}
	for pid := range k.idle {
		if !seen[pid] {
			delete(k.idle, pid)
		}
	}
	own := map[string]bool{} // the agent's ends of commands' output pipes
	for _, pipe := range k.pipes(os.Getpid()) {
		own[pipe.name] = true
	}
	kicked := map[int]bool{} // commands (by their first pid) kicked now
	for pipe, pids := range holders {
		if len(pids) < 2 || own[pipe] {
			continue
		}
		b := k.next[pipe]
		if now.Before(b.at) {
			continue
		}
		b.pause = min(max(2*b.pause, stallAfter), stallMaxBackoff)
		b.at = now.Add(b.pause)
		waiting, err := k.peek(paths[pipe]) // and wakes its waiters
		stalled := err == nil && waiting > 0
		if stalled && !b.woken {
			// Woken now; stopped and continued only if still asleep
			// beside the bytes at the next look, soon.
			b.woken, b.at = true, now.Add(stallAfter)
			k.log.Info("woke the waiters of an idle pipe with bytes in it", "pipe", pipe, "pids", pids, "bytes", waiting)
		} else {
			b.woken = false
		}
		k.next[pipe] = b
		if !stalled || b.woken {
			continue
		}
		tree := trees[pipe]
		if kicked[tree[0]] {
			continue
		}
		kicked[tree[0]] = true
		order := parentsFirst(tree, byPid)
		k.log.Info("kicking a stalled pipeline", "pipe", pipe, "pids", pids, "bytes", waiting, "command", order)
		k.kick(order)
	}
	for pipe, b := range k.next {
		if now.Sub(b.at) > stallMaxBackoff {
			delete(k.next, pipe)
		}
	}
}

// pipesOf lists the pipes among pid's open files.
func pipesOf(pid int) []pipeRef {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	var out []pipeRef
	for _, n := range names {
		if target, err := os.Readlink(dir + "/" + n); err == nil && strings.HasPrefix(target, "pipe:") {
			out = append(out, pipeRef{name: target, path: dir + "/" + n})
		}
	}
	return out
}

// peekPipe opens the pipe at path (a /proc/PID/fd/N) for reading and
// writing, without blocking, and returns how many bytes wait in it. Its
// close wakes every reader and writer waiting on the pipe: gVisor notifies
// them when a descriptor of the pipe is released. The bytes stay where
// they are. The process may have put something else at N since it was
// listed (it is hostile): O_NOCTTY keeps a terminal from becoming the
// agent's, and anything but a pipe is closed unread.
func peekPipe(path string) (int, error) {
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return 0, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return 0, fmt.Errorf("%s is no longer a pipe", path)
	}
	return unix.IoctlGetInt(fd, unix.TIOCINQ) // FIONREAD
}

// parentsFirst orders a command's processes so that each comes after its
// parent, and leaves out those already stopped (by a debugger, by the user,
// by job control): the kicker must not continue them.
func parentsFirst(tree []int, byPid map[int]procEntry) []int {
	in := make(map[int]bool, len(tree))
	for _, pid := range tree {
		in[pid] = true
	}
	depth := func(pid int) int {
		d := 0
		for e, ok := byPid[pid]; ok && in[e.ppid] && d < len(tree); e, ok = byPid[e.ppid] {
			d++
		}
		return d
	}
	var out []int
	for _, pid := range tree {
		if e := byPid[pid]; e.state != 'T' && e.state != 't' {
			out = append(out, pid)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int { return depth(a) - depth(b) })
	return out
}

// stopAndContinue stops a whole command, parents before children, and
// continues it, children before parents.
//
// The whole command, not only the two processes on the stalled pipe: a
// parent that waits with WUNTRACED (sudo, a job-control shell) and sees
// its child stopped stops itself, and nothing would continue it. Stopped
// first, such a parent runs again only after its children are running,
// and finds nothing stopped. (Were it left stopped, gVisor would also hang
// up its whole process group, orphaned as every command's session is, at
// the next exit in it: `sudo apt-get` ended with exit 129 that way.)
//
// hold is how long the command stays stopped: 0 but in tests.
func stopAndContinue(order []int, hold time.Duration) {
	for _, pid := range order {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	time.Sleep(hold)
	for _, pid := range slices.Backward(order) {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}
