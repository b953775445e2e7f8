package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The guard is the sandbox's OOM killer and the keeper of its process table.
//
// gVisor's kernel has no OOM killer: a sandbox that goes over its host
// memory limit is killed whole, agent included. And a sandbox kept full of
// forking processes is one whose agent cannot answer: its system calls wait
// behind theirs. So the agent watches both from inside and kills the
// command at fault, with its whole tree (process group, session,
// descendants and cgroup), and ends the command's stderr with a line that
// says why (proc.note):
//
//   - memory: when the memory that processes and files hold (see
//     memReading.held: what the host limit is charged for, less gVisor's
//     own and what it is still releasing) reaches the sandbox's memory
//     size, the command whose growth took it there is killed (see
//     memoryVictim; the note says how much it grew, what it held, the
//     limit), never a command that merely holds memory beside it. Its
//     result says oomKilled, exit code 137. The host limit sits higher by
//     a headroom (the driver's: a quarter of the size, 64 MiB, and 1 MiB
//     per process the sandbox may run) that covers gVisor's own memory,
//     what it is still releasing, and the guard's reaction time; memory is
//     sampled more often the closer it is to the limit, through a memory
//     cgroup that makes gVisor count it afresh (see memGauge), and rarely
//     while no process runs. Memory in use at the emergency level, half
//     way to the host limit, gets the command that grows killed at once,
//     without waiting memSettle for the last victim's memory. A command
//     that outgrows the guard anyway meets the host's OOM killer, which
//     the driver points at the command, and is reported the same (see
//     proc.noteHostOOMKill).
//   - processes: when the sandbox stays at 90% or more of its process limit
//     (RLIMIT_NPROC, per user, which the driver sizes so that a sandbox full
//     of processes still fits in its memory) for pidsSustain, the command
//     with the most processes and threads is killed (processLimitKilled).
//     A fork bomb sits at the limit, retrying, until then; a program that
//     forks up to the limit and cleans up is left alone. (The agent cannot
//     stop a bomb sooner: its own system calls queue behind the bomb's
//     forks until the limit stops them.)
//
// While it picks and kills, the guard stops every other process in the
// sandbox (kill(-1) spares only PID 1 and the agent): growth stops at once
// and the scan of /proc does not compete for the CPU. They are continued
// afterwards.
//
// A "command" is a running exec or background process with everything it
// started, or, once its main process has exited, what is left of its
// session (a background child such as `server &`).
type guard struct {
	log  *slog.Logger
	live *liveSet

	// memLimit is the memory held (memReading.held) at which a command is
	// killed (0: memory is not watched); memEmergency is the memory in use
	// (memReading.used) at which the guard kills a growing command without
	// waiting for the last kill's memory to be freed.
	// Both are written by setMemory (at boot, and when the host resizes a
	// sandbox restored from a snapshot) and read by several goroutines.
	memLimit, memEmergency atomic.Int64
	// pidsTrigger is the process count that, sustained, gets a command
	// killed (0: not watched).
	pidsTrigger int
	// on is false outside a sandbox: the guard never acts on a host.
	on bool
	// pidsLimit is the process limit pidsTrigger is 90% of.
	pidsLimit int
	// fullAt is when a sample last found the memory in use at
	// memFullPercent of memLimit or more (UnixNano; 0: never).
	fullAt atomic.Int64

	// growth is what commands held at recent samples; overSince is when
	// the memory held went over the limit (zero: it is not); warned is set
	// once a stay over the limit with nothing to kill has been logged.
	// Used by the run loop only.
	growth    growthLog
	lastNoted time.Time
	overSince time.Time
	warned    bool

	// wake is signalled when a command starts.
	wake chan struct{}

	// Sources and actions, replaceable in tests.
	readMem    func() (memReading, error)
	countProcs func() int
	scan       func() []procEntry
	stopOthers func(stop bool)
}

const (
	// The memory is sampled every guardMinInterval to guardMaxInterval:
	// half the time that growth of guardMaxGrowth bytes a second (measured:
	// 0.7 GB/s for one thread filling memory) would take to reach the
	// limit. A wakeup costs the host a few milliseconds of CPU under gVisor,
	// so an idle sandbox of 512 MiB is sampled about 4 times a second.
	guardMaxInterval = 500 * time.Millisecond
	// guardQuietInterval is the sampling interval while no command runs;
	// starting one wakes the guard at once.
	guardQuietInterval = 10 * time.Second
	guardMinInterval   = 5 * time.Millisecond
	guardMaxGrowth     = 1 << 30
	// memSettle is how long after a kill the guard waits for the memory to
	// be freed before it kills another command (unless memEmergency).
	memSettle = 300 * time.Millisecond
	// minVictimBytes: a command smaller than this is not worth killing; the
	// memory is held by something else (files in /tmp, the agent).
	minVictimBytes = 16 << 20
	// reservedForKernel is kept free below the host limit when the memory
	// size passed to the agent leaves no headroom.
	reservedForKernel = 32 << 20
	// memFullPercent and memFullRecent: see guard.memoryFull.
	memFullPercent = 90
	memFullRecent  = 2 * time.Second
	pidsInterval   = 500 * time.Millisecond
	pidsSustain    = time.Second
	// minVictimProcs: a command with fewer processes and threads is not
	// what fills the process table. It is low because a bomb at the limit
	// may be mostly zombies waiting for PID 1, which count against the
	// limit but belong to no command; its live processes are what fork.
	minVictimProcs = 4
)

// newGuard configures the guard of a sandbox of memoryBytes. The guard is
// off when memoryBytes is 0 (the agent is not in a sandbox the driver
// sized). pidsLimit is how many processes and threads each user may have
// (0: the agent's RLIMIT_NPROC, which its commands inherit).
func newGuard(log *slog.Logger, live *liveSet, memoryBytes int64, pidsLimit int) *guard {
	g := &guard{log: log, live: live, wake: make(chan struct{}, 1), readMem: newMemGauge().read,
		countProcs: countProcs, scan: newStatCache().scan, stopOthers: stopOthers}
	if memoryBytes <= 0 || !inSandbox() {
		return g
	}
	g.on = true
	g.setMemory(memoryBytes)
	if pidsLimit <= 0 {
		var rl syscall.Rlimit
		if err := syscall.Getrlimit(rlimitNproc, &rl); err == nil && rl.Cur < 1<<22 {
			pidsLimit = int(rl.Cur)
		}
	}
	if pidsLimit > 0 {
		g.pidsLimit, g.pidsTrigger = pidsLimit, max(pidsLimit*9/10, 1)
	}
	return g
}

// inSandbox reports whether the agent is its namespace's PID 1 (or runs
// the same binary as PID 1), as in every sandbox. The guard stops every other process while it picks
// a victim, which must never happen on a host.
func inSandbox() bool {
	self, err1 := os.Stat("/proc/self/exe")
	init, err2 := os.Stat("/proc/1/exe")
	return err1 == nil && err2 == nil && os.SameFile(self, init)
}

// rlimitNproc is RLIMIT_NPROC, which package syscall does not name.
const rlimitNproc = 6

// setMemory sets the kill level for a sandbox of size bytes. MemTotal
// inside is the host limit; the level stays below it.
func (g *guard) setMemory(size int64) {
	limit, emergency := size, size
	m, err := g.readMem()
	if total := m.total; err == nil && total > 0 {
		if hard := total - reservedForKernel; limit > hard {
			limit = max(hard, total/2)
		}
		emergency = limit + (total-limit)/2
	}
	g.memLimit.Store(limit)
	g.memEmergency.Store(emergency)
}

// resize sets the kill level of a sandbox whose memory size changed to
// size bytes (a sandbox restored from a snapshot with more memory than
// its source had): MemTotal inside already shows the new host limit. A
// guard that is off stays off.
func (g *guard) resize(size int64) {
	if g.on && size > 0 {
		g.setMemory(size)
	}
}

// run watches until ctx is done.
func (g *guard) run(ctx context.Context) {
	if !g.on {
		return
	}
	g.log.Info("guard watching", "memoryLimitBytes", g.memLimit.Load(), "pidsTrigger", g.pidsTrigger)
	var lastKill, nextPids time.Time
	var overSince time.Time
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-g.wake:
			timer.Stop()
		}
		now := time.Now()
		wait := g.checkMemory(now, &lastKill)
		if !now.Before(nextPids) {
			nextPids = now.Add(pidsInterval)
			g.checkProcs(now, &overSince)
		}
		if g.quiet() {
			wait = guardQuietInterval
		}
		timer.Reset(wait)
	}
}

// quiet reports whether nothing runs in the sandbox but the agent and its
// PID 1: then nothing can grow, and the guard sleeps until a command starts.
func (g *guard) quiet() bool {
	return len(g.live.list()) == 0 && g.countProcs() <= 2
}

// checkMemory samples the memory, kills if it is over the limit, and
// returns how long until the next sample.
func (g *guard) checkMemory(now time.Time, lastKill *time.Time) time.Duration {
	m, err := g.readMem()
	if err != nil {
		return guardMaxInterval
	}
	if m.used >= g.memLimit.Load()*memFullPercent/100 {
		g.fullAt.Store(now.UnixNano())
	}
	if m.held < g.memLimit.Load() {
		g.overSince = time.Time{}
	} else if g.overSince.IsZero() {
		g.overSince = now
	}
	wait := g.interval(m)
	if m.held >= g.memLimit.Load() || m.used >= g.memEmergency.Load() {
		wait = g.overLimit(now, m, lastKill)
	} else {
		g.warned = false
	}
	// Noted after any kill, which measures growth up to now from earlier.
	g.noteGrowth(now, m)
	return wait
}

// overLimit kills for memory unless the last victim's memory may still be
// on its way out, and returns how long until the next sample.
func (g *guard) overLimit(now time.Time, m memReading, lastKill *time.Time) time.Duration {
	if now.Sub(*lastKill) < memSettle && m.used < g.memEmergency.Load() {
		return guardMinInterval
	}
	switch killed, found := g.killForMemory(now, m); {
	case killed:
		*lastKill = time.Now()
	case !found:
		return memOverNoGrowth
	}
	return guardMinInterval
}

// noteGrowth adds to the growth log from memWatchPercent of the limit on
// (of what is held or in use: a command may grow while gVisor releases a
// dead one's memory), at most every memNoteEvery, and empties it below.
func (g *guard) noteGrowth(now time.Time, m memReading) {
	switch {
	case max(m.held, m.used) < g.memLimit.Load()*memWatchPercent/100:
		g.growth.reset()
	case now.Sub(g.lastNoted) >= memNoteEvery:
		g.lastNoted = now
		g.growth.add(now, g.units(g.scan()))
	}
}

// killForMemory kills the command memoryVictim picks, if any. found is
// false when there was none even before every process was stopped. Size
// decides only over the limit of what is held: memory in use that nothing
// holds is not a command's.
func (g *guard) killForMemory(now time.Time, m memReading) (killed, found bool) {
	ref, haveRef := g.growth.reference()
	bySize := bySizeNone
	switch {
	case m.held < g.memLimit.Load(): // size decides nothing: see above
	case !haveRef:
		bySize = bySizeNoSample
	case now.Sub(g.overSince) >= memSustain:
		bySize = bySizeSustained
	}
	pick := func(units []*unit) (*unit, string, bool) {
		if !haveRef && bySize == bySizeNone {
			return nil, "", false // no growth to measure yet
		}
		c, ok := memoryVictim(units, ref, now, bySize)
		if !ok {
			return nil, "", false
		}
		return c.u, memoryNote(c, g.memLimit.Load()), true
	}
	// Look before stopping every process: over the limit with no command
	// growing, the guard would otherwise stop the sandbox at every sample.
	if _, _, ok := pick(g.units(g.scan())); !ok {
		if !g.warned {
			g.warned = true
			g.log.Warn("sandbox over its memory limit, but no command is growing or large enough to kill",
				"heldBytes", m.held, "usedBytes", m.used, "limitBytes", g.memLimit.Load())
		}
		return false, false
	}
	return g.kill(byMemory, m.held, pick), true
}

// memoryFull reports whether the memory in use is at memFullPercent of the
// kill level or more, now or at a sample in the last memFullRecent: the
// state in which the host's OOM killer acts (see proc.noteHostOOMKill).
func (g *guard) memoryFull() bool {
	if t := g.fullAt.Load(); t != 0 && time.Since(time.Unix(0, t)) < memFullRecent {
		return true
	}
	m, err := g.readMem()
	return err == nil && m.used >= g.memLimit.Load()*memFullPercent/100
}

// hostKillNote is the line a command's stderr ends with when one of its
// processes was killed by SIGKILL from outside the agent while the memory
// was full (proc.noteHostOOMKill), and "" when the memory is not full.
func (g *guard) hostKillNote() string {
	if !g.memoryFull() {
		return ""
	}
	return fmt.Sprintf("withruntime: out of memory: a process of this command was killed (SIGKILL) from outside the agent "+
		"while the sandbox was at its memory limit of %d MiB: its memory reached the host's limit for the sandbox "+
		"before the agent could act\n", mib(g.memLimit.Load()))
}

// checkProcs kills the command with the most processes when the sandbox
// has stayed at its process limit for pidsSustain.
func (g *guard) checkProcs(now time.Time, overSince *time.Time) {
	if g.pidsTrigger <= 0 {
		return
	}
	switch n := g.countProcs(); {
	case n < g.pidsTrigger:
		*overSince = time.Time{}
	case overSince.IsZero():
		*overSince = now
	case now.Sub(*overSince) >= pidsSustain:
		g.kill(byProcs, int64(n), g.procsVictim)
		*overSince = time.Time{}
	}
}

// interval is how long until the next memory sample: half the time that
// the fastest growth would take to reach the limit (or, for the memory in
// use, the emergency level).
func (g *guard) interval(m memReading) time.Duration {
	room := min(g.memLimit.Load()-m.held, g.memEmergency.Load()-m.used)
	d := time.Duration(float64(room) / guardMaxGrowth / 2 * float64(time.Second))
	return min(max(d, guardMinInterval), guardMaxInterval)
}

type killReason int

const (
	byMemory killReason = iota // the sandbox's memory (see memoryVictim)
	byProcs                    // the process limit: the most processes and threads
)

func (r killReason) String() string {
	return [...]string{"memory", "process limit"}[r]
}

// unit is one command's processes: a running command's tree and cgroup
// (daemons that left the tree included), or what is left of a finished
// command's session.
type unit struct {
	root  int   // the command's pid, which is also its session and group id
	p     *proc // the running command, if any
	pids  []int
	rss   int64     // bytes
	tasks int       // processes and threads
	group bool      // some member is still in the process group root
	top   procEntry // the member with the most resident memory
}

// pageSize converts /proc's resident pages to bytes.
var pageSize = int64(os.Getpagesize())

// units sorts the sandbox's processes into commands. The agent, PID 1 and
// anything else in the agent's session are left out.
func (g *guard) units(procs []procEntry) []*unit {
	self := os.Getpid()
	selfSid := -1
	byPid := make(map[int]procEntry, len(procs))
	for _, e := range procs {
		byPid[e.pid] = e
		if e.pid == self {
			selfSid = e.sid
		}
	}
	claimed := map[int]bool{}
	add := func(u *unit, e procEntry) {
		claimed[e.pid] = true
		if e.state == 'Z' || e.state == 'X' {
			return // dead: holds nothing, and waits only for its reaper
		}
		u.pids = append(u.pids, e.pid)
		u.rss += e.rssPages * pageSize
		u.tasks += max(e.threads, 1)
		if len(u.pids) == 1 || e.rssPages > u.top.rssPages {
			u.top = e
		}
		if e.pgid == u.root {
			u.group = true
		}
	}
	var out []*unit
	for _, p := range g.live.list() {
		select {
		case <-p.exited:
			continue // its pid may be reused; its leftovers are grouped below
		default:
		}
		u := &unit{root: p.pid, p: p}
		tree := treeOf(procs, p.pid)
		if p.cg != nil {
			// Daemons that left the tree are still in the cgroup.
			tree = append(tree, p.cg.procs()...)
		}
		for _, pid := range tree {
			if e, ok := byPid[pid]; ok && !claimed[pid] && e.sid != selfSid {
				add(u, e)
			}
		}
		out = append(out, u)
	}
	bySid := map[int]*unit{}
	for _, e := range procs {
		if claimed[e.pid] || e.pid <= 1 || e.pid == self || e.sid == selfSid || e.sid <= 0 {
			continue
		}
		u := bySid[e.sid]
		if u == nil {
			u = &unit{root: e.sid}
			bySid[e.sid] = u
			out = append(out, u)
		}
		add(u, e)
	}
	return out
}

// procsVictim picks what to kill for the process limit: the command with
// the most processes and threads, if it has minVictimProcs.
func (g *guard) procsVictim(units []*unit) (*unit, string, bool) {
	var best *unit
	for _, u := range units {
		if u.tasks >= minVictimProcs && (best == nil || u.tasks > best.tasks) {
			best = u
		}
	}
	if best == nil {
		return nil, "", false
	}
	note := fmt.Sprintf("withruntime: process limit: killed this command, which had the most processes and threads, %d "+
		"(pid %d %s first), when the sandbox had stayed at its limit of %d for %v\n",
		best.tasks, best.root, best.top.comm, g.pidsLimit, pidsSustain)
	return best, note, true
}

// kill kills the command pick chooses, with its whole tree, and reports
// whether there was one; the note pick returns ends the command's stderr.
// Every other process is stopped meanwhile: in a sandbox busy forking or
// faulting in memory the agent's own system calls wait their turn behind
// theirs, and reading /proc process by process would take seconds.
func (g *guard) kill(why killReason, level int64, pick func([]*unit) (*unit, string, bool)) bool {
	g.stopOthers(true)
	defer g.stopOthers(false)
	u, note, ok := pick(g.units(g.scan()))
	if !ok {
		g.log.Warn("sandbox at a limit, but no command to kill", "reason", why.String(), "level", level)
		return false
	}
	if u.p == nil {
		u.p = g.findLive(u.root)
	}
	g.log.Warn("killing a command", "reason", why.String(), "level", level, "pid", u.root,
		"running", u.p != nil, "processes", len(u.pids), "tasks", u.tasks, "rssBytes", u.rss, "note", note)
	if u.p != nil {
		u.p.kill(why, note)
	} else {
		signalTree(u.root, syscall.SIGKILL, u.group)
	}
	return true
}

// findLive finds the running command whose pid is root: one that started
// after the live set was read is its own session (sid == its pid), and its
// result must say why it was killed.
func (g *guard) findLive(root int) *proc {
	for _, p := range g.live.list() {
		if p.pid == root {
			return p
		}
	}
	return nil
}

// stopOthers stops (or continues) every process of the sandbox but PID 1
// and the agent.
func stopOthers(stop bool) {
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	_ = syscall.Kill(-1, sig)
}

// countProcs counts the processes in /proc.
func countProcs() int {
	f, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	n := 0
	for _, name := range names {
		if name != "" && name[0] >= '0' && name[0] <= '9' {
			n++
		}
	}
	return n
}

// liveSet is the commands (exec and background) whose output is still
// being collected.
type liveSet struct {
	mu    sync.Mutex
	procs map[*proc]struct{}
}

func newLiveSet() *liveSet { return &liveSet{procs: map[*proc]struct{}{}} }

// add tracks p until it is done.
func (l *liveSet) add(p *proc) {
	l.mu.Lock()
	l.procs[p] = struct{}{}
	l.mu.Unlock()
	go func() {
		<-p.done
		l.mu.Lock()
		delete(l.procs, p)
		l.mu.Unlock()
	}()
}

func (l *liveSet) list() []*proc {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*proc, 0, len(l.procs))
	for p := range l.procs {
		out = append(out, p)
	}
	return out
}
