package agent

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
)

// memReading is one sample of the sandbox's memory, in bytes.
type memReading struct {
	// total is MemTotal: under gVisor, the host's memory limit.
	total int64
	// used is MemTotal - MemFree: what the host's limit is charged for,
	// memory gVisor is still handing back to the host included.
	used int64
	// held is what processes and files hold: anonymous memory, tmpfs and
	// the page cache (AnonPages + Mapped in gVisor's meminfo). It leaves
	// out gVisor's "system" memory, which is a few MiB of its own unless a
	// process just died: gVisor counts a dead process's pages as system
	// memory until its releaser has decommitted them, 128 MB at a time, in
	// hundreds of milliseconds on a loaded host (seen: used 884 MiB, held
	// 12 MiB right after a 900 MiB command was killed). Killing another
	// command meanwhile frees nothing sooner.
	held int64
}

// memcgRoot is the sandbox's memory cgroup hierarchy (gVisor's cgroupfs,
// mounted by the driver); the agent is in its root.
const memcgRoot = "/sys/fs/cgroup/memory"

// memGauge reads the sandbox's memory through files kept open: under gVisor
// reading an open file again costs about 20 µs of CPU, opening it a
// millisecond.
//
// /proc/meminfo alone lags: gVisor learns that a command's new pages were
// committed only by scanning for them, and the scan meminfo asks for is
// skipped for eight times the last scan's duration (pgalloc.UpdateUsage).
// On a loaded host that left meminfo unchanged for seconds while a command
// grew to the host's limit (C15: no sample over 717 MiB of a 1024 MiB
// sandbox while the host's OOM killer killed two commands at 1600 MiB).
// Reading a memory cgroup's usage_in_bytes makes gVisor scan that cgroup's
// pages at once, and the counters it updates are the ones meminfo prints,
// so the gauge reads the root cgroup's usage first and meminfo right
// after.
type memGauge struct {
	mu      sync.Mutex
	meminfo *os.File
	memcg   *os.File // nil: no memory cgroup to refresh gVisor's counters with
	buf     []byte
}

func newMemGauge() *memGauge {
	g := &memGauge{buf: make([]byte, 8192)}
	g.memcg = openMemcgUsage(memcgRoot)
	return g
}

// openMemcgUsage opens root's memory.usage_in_bytes if the agent is in
// root, the cgroup that holds every process of the sandbox.
func openMemcgUsage(root string) *os.File {
	procs, err := os.ReadFile(filepath.Join(root, "cgroup.procs"))
	if err != nil || !slices.Contains(parsePids(procs), os.Getpid()) {
		return nil
	}
	f, err := os.Open(filepath.Join(root, "memory.usage_in_bytes"))
	if err != nil {
		return nil
	}
	return f
}

func (g *memGauge) read() (memReading, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.memcg != nil {
		// Only for its side effect: gVisor's counters are fresh after it.
		if _, err := g.memcg.ReadAt(g.buf, 0); err != nil && !errors.Is(err, io.EOF) {
			g.memcg.Close()
			g.memcg = nil
		}
	}
	if g.meminfo == nil {
		f, err := os.Open("/proc/meminfo")
		if err != nil {
			return memReading{}, err
		}
		g.meminfo = f
	}
	n, err := g.meminfo.ReadAt(g.buf, 0)
	if n == 0 && err != nil {
		g.meminfo.Close()
		g.meminfo = nil
		return memReading{}, err
	}
	return parseMeminfo(g.buf[:n]), nil
}

// parseMeminfo reads a memReading from /proc/meminfo. Without the lines
// held is made of, held is used.
func parseMeminfo(data []byte) memReading {
	var total, free, anon, mapped int64 = 0, 0, -1, -1
	fields := map[string]*int64{"MemTotal": &total, "MemFree": &free, "AnonPages": &anon, "Mapped": &mapped}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		key, rest, ok := bytes.Cut(line, []byte(":"))
		dst := fields[string(key)]
		if !ok || dst == nil {
			continue
		}
		if f := bytes.Fields(rest); len(f) > 0 {
			kb, _ := strconv.ParseInt(string(f[0]), 10, 64)
			*dst = kb << 10
		}
	}
	m := memReading{total: total, used: max(total-free, 0)}
	m.held = m.used
	if anon >= 0 && mapped >= 0 {
		m.held = min(anon+mapped, m.used)
	}
	return m
}
