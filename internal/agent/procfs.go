package agent

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// procEntry is one process as seen in /proc/PID/stat.
type procEntry struct {
	pid, ppid, pgid, sid int
	comm                 string // the command name, as in ps
	state                byte   // 'R', 'S', ... 'Z' for a zombie
	threads              int
	rssPages             int64
	cpuTicks             int64  // user and system time, in clock ticks
	childTicks           int64  // user and system time of its reaped children (cutime + cstime)
	start                uint64 // start time, in clock ticks after boot
}

// scanProcs reads the state, parent, group, session, CPU time, thread
// count, start time and resident size of every process in /proc. Processes
// that vanish while scanning are skipped.
func scanProcs() []procEntry {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]procEntry, 0, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if pe, ok := parseStat(pid, data); ok {
			out = append(out, pe)
		}
	}
	return out
}

// parseStat parses /proc/PID/stat.
func parseStat(pid int, data []byte) (procEntry, bool) {
	// The command name may hold spaces and parentheses: fields start after
	// the last ')'. They are: state ppid pgrp session ...
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procEntry{}, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 4 || len(f[0]) == 0 {
		return procEntry{}, false
	}
	e := procEntry{pid: pid, state: f[0][0]}
	if j := bytes.IndexByte(data, '('); j >= 0 && j < i {
		e.comm = string(data[j+1 : i])
	}
	e.ppid, _ = strconv.Atoi(f[1])
	e.pgid, _ = strconv.Atoi(f[2])
	e.sid, _ = strconv.Atoi(f[3])
	if len(f) > 21 { // fields 14 to 17, 20, 22 and 24 of stat(5)
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		cutime, _ := strconv.ParseInt(f[13], 10, 64)
		cstime, _ := strconv.ParseInt(f[14], 10, 64)
		e.cpuTicks = utime + stime
		e.childTicks = max(0, cutime) + max(0, cstime)
		e.threads, _ = strconv.Atoi(f[17])
		e.start, _ = strconv.ParseUint(f[19], 10, 64)
		e.rssPages, _ = strconv.ParseInt(f[21], 10, 64)
	}
	return e, true
}

// statCache scans /proc like scanProcs through files kept open between
// scans: under gVisor opening a /proc file costs about a millisecond of
// CPU, reading an open one again about 20 µs. A file kept open for a pid
// that has been reused reads as an error, is dropped, and is opened afresh
// at the next scan.
type statCache struct {
	files map[int]*os.File
	buf   []byte
}

func newStatCache() *statCache { return &statCache{files: map[int]*os.File{}, buf: make([]byte, 4096)} }

func (c *statCache) scan() []procEntry {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	seen := make(map[int]bool, len(names))
	out := make([]procEntry, 0, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		seen[pid] = true
		f := c.files[pid]
		if f == nil {
			if f, err = os.Open("/proc/" + name + "/stat"); err != nil {
				continue
			}
			c.files[pid] = f
		}
		n, err := f.ReadAt(c.buf, 0)
		if n == 0 && err != nil {
			f.Close()
			delete(c.files, pid)
			continue
		}
		pe, ok := parseStat(pid, c.buf[:n])
		if !ok || pe.state == 'Z' || pe.state == 'X' {
			// Reopen next time: the pid may belong to another process once
			// this one is reaped.
			f.Close()
			delete(c.files, pid)
		}
		if ok {
			out = append(out, pe)
		}
	}
	for pid, f := range c.files {
		if !seen[pid] {
			f.Close()
			delete(c.files, pid)
		}
	}
	return out
}

// close releases the open files.
func (c *statCache) close() {
	for pid, f := range c.files {
		f.Close()
		delete(c.files, pid)
	}
}

// treeOf returns the pids that belong to the command whose main process is
// root: its descendants by PPid links (which may have left its session), and
// every member of its session and process group (which may have been
// reparented away from it). root itself is included only if alive.
func treeOf(procs []procEntry, root int) []int {
	children := map[int][]int{}
	var members []int
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
		if p.sid == root || p.pgid == root {
			members = append(members, p.pid)
		}
	}
	seen := map[int]bool{}
	queue := append([]int{root}, members...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		queue = append(queue, children[pid]...)
	}
	alive := map[int]bool{}
	for _, p := range procs {
		alive[p.pid] = true
	}
	var out []int
	for pid := range seen {
		if alive[pid] && pid != os.Getpid() && pid > 1 {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// signalTree sends sig to the process group of root (when groupAlive) and
// to every process treeOf finds. The tree is found before anything is
// signalled, since a killed parent's children are at once reparented out of
// reach of the PPid walk. For SIGKILL the tree is first stopped with SIGSTOP
// and scanned again, so nothing can fork a child out of reach between the
// scan and the kill.
func signalTree(root int, sig syscall.Signal, groupAlive bool) {
	pids := treeOf(scanProcs(), root)
	if sig == syscall.SIGKILL {
		if groupAlive {
			_ = syscall.Kill(-root, syscall.SIGSTOP)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGSTOP)
		}
		pids = append(pids, treeOf(scanProcs(), root)...)
	}
	if groupAlive {
		_ = syscall.Kill(-root, sig)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
}

// signalNames maps the signals a user may name to their numbers.
var signalNames = map[string]syscall.Signal{
	"SIGHUP": syscall.SIGHUP, "SIGINT": syscall.SIGINT, "SIGQUIT": syscall.SIGQUIT,
	"SIGILL": syscall.SIGILL, "SIGTRAP": syscall.SIGTRAP, "SIGABRT": syscall.SIGABRT,
	"SIGBUS": syscall.SIGBUS, "SIGFPE": syscall.SIGFPE, "SIGKILL": syscall.SIGKILL,
	"SIGUSR1": syscall.SIGUSR1, "SIGSEGV": syscall.SIGSEGV, "SIGUSR2": syscall.SIGUSR2,
	"SIGPIPE": syscall.SIGPIPE, "SIGALRM": syscall.SIGALRM, "SIGTERM": syscall.SIGTERM,
	"SIGSTKFLT": syscall.SIGSTKFLT, "SIGCHLD": syscall.SIGCHLD, "SIGCONT": syscall.SIGCONT,
	"SIGSTOP": syscall.SIGSTOP, "SIGTSTP": syscall.SIGTSTP, "SIGTTIN": syscall.SIGTTIN,
	"SIGTTOU": syscall.SIGTTOU, "SIGURG": syscall.SIGURG, "SIGXCPU": syscall.SIGXCPU,
	"SIGXFSZ": syscall.SIGXFSZ, "SIGVTALRM": syscall.SIGVTALRM, "SIGPROF": syscall.SIGPROF,
	"SIGWINCH": syscall.SIGWINCH, "SIGIO": syscall.SIGIO, "SIGPWR": syscall.SIGPWR,
	"SIGSYS": syscall.SIGSYS,
}

// signalName is the conventional name of sig ("SIGKILL"), or "SIG<n>".
func signalName(sig syscall.Signal) string {
	for name, s := range signalNames {
		if s == sig {
			return name
		}
	}
	return fmt.Sprintf("SIG%d", int(sig))
}

// parseSignal accepts "SIGTERM", "TERM", "sigterm" or a number; "" is SIGKILL.
func parseSignal(s string) (syscall.Signal, error) {
	if s == "" {
		return syscall.SIGKILL, nil
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(strings.TrimSpace(s))
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig, ok := signalNames[name]; ok {
		return sig, nil
	}
	return 0, badRequest("unknown signal %q; use a name such as \"SIGTERM\", \"SIGINT\" or \"SIGKILL\" (the default)", s)
}
