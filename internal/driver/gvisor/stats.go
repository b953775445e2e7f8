package gvisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"withruntime.dev/runtime/internal/driver"
)

// cgroupStats samples a sandbox from the host, without starting a process
// (metering samples every running sandbox every few seconds): its CPU time
// and memory use from its host cgroup, and the part of that CPU time that
// gVisor's own processes spent (see isolationCPU). ok is false when the
// cgroup cannot be read (then Stats asks runsc for the cgroup's figures).
//
// Every figure is the host kernel's: nothing inside the sandbox, root
// included, can write any of them. The sandbox's own accounting (the
// sentry's per-task CPU clocks, what `time` and /proc show inside) is not
// used: it samples which tasks are running every 10 ms, so a process that
// sleeps across the ticks is not counted (measured: half of a busy loop
// hidden), and it counts a task that waits for a host CPU as running.
func (d *Driver) cgroupStats(id string) (driver.Stats, bool) {
	// The isolation layer's CPU first: read after the total, it could hold
	// CPU the total does not, and the sandbox's part would come out short.
	iso, isoErr := d.isolationCPU(id)
	st, ok := hostCgroupStats(id)
	if !ok {
		return driver.Stats{}, false
	}
	if isoErr == nil && iso <= st.CPUSeconds {
		st.IsolationCPUSeconds, st.IsolationKnown = iso, true
	}
	return st, true
}

// hostCgroupStats reads a sandbox's CPU time and memory use from its host
// cgroup: the figures `runsc events --stats` reports (runsc reads them
// there).
func hostCgroupStats(id string) (driver.Stats, bool) {
	now := time.Now()
	// cgroup v1: cpuacct.usage in nanoseconds.
	if b, err := os.ReadFile("/sys/fs/cgroup/cpuacct/withruntime/" + id + "/cpuacct.usage"); err == nil {
		ns, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return driver.Stats{}, false
		}
		st := driver.Stats{CPUSeconds: float64(ns) / 1e9, At: now}
		if b, err := os.ReadFile("/sys/fs/cgroup/memory/withruntime/" + id + "/memory.usage_in_bytes"); err == nil {
			st.MemoryBytes, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		}
		return st, true
	}
	// cgroup v2: usage_usec in cpu.stat.
	for _, dir := range []string{"/sys/fs/cgroup/withruntime/", "/sys/fs/cgroup/unified/withruntime/"} {
		us, ok := readKeyed(dir+id+"/cpu.stat", "usage_usec")
		if !ok {
			continue
		}
		st := driver.Stats{CPUSeconds: float64(us) / 1e6, At: now}
		if b, err := os.ReadFile(dir + id + "/memory.current"); err == nil {
			st.MemoryBytes, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		}
		return st, true
	}
	return driver.Stats{}, false
}

// isolationCPU is the CPU time, in seconds since they started, that the
// sandbox's gVisor kernel (the runsc-sandbox process: system calls, page
// faults, its network stack, the platform's own work) and its file proxy
// (runsc-gofer) spent, as the host kernel counts it for those two
// processes (/proc/PID/stat utime+stime, all their threads, exited ones
// included; 10 ms resolution).
//
// Under the systrap platform (runsc's default) the sandbox's processes run
// in stub processes of their own, children of the sentry, in the same host
// cgroup; so the cgroup's CPU minus this is the CPU the host spent running
// the sandbox's own code, exited processes included. Nothing inside can
// move its code's CPU out of the stubs.
//
// The two PIDs come from runsc's state file, in the driver's state
// directory (never visible inside a sandbox), and each must be in the
// sandbox's own host cgroup (so a PID that was reused counts for nothing).
// With another platform (--platform=kvm runs the sandbox's code in the
// sentry's own threads) this errors, and the sandbox is billed all of its
// host CPU.
func (d *Driver) isolationCPU(id string) (float64, error) {
	if p := platformFlag(d.cfg.ExtraFlags); p != "" && p != "systrap" {
		return 0, fmt.Errorf("platform %q runs sandboxed code outside stub processes", p)
	}
	if v, ok := d.isoProcs.Load(id); ok {
		if total, ok := v.(*isoProcs).cpu(); ok {
			return total, nil
		}
		d.isoProcs.Delete(id)
	}
	b, err := os.ReadFile(filepath.Join(d.cfg.StateDir, "runsc", id+"_sandbox:"+id+".state"))
	if err != nil {
		return 0, err
	}
	var st struct {
		GoferPid int `json:"goferPid"`
		Sandbox  struct {
			Pid int `json:"pid"`
		} `json:"sandbox"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return 0, fmt.Errorf("runsc state of %s: %w", id, err)
	}
	if st.Sandbox.Pid <= 0 {
		return 0, fmt.Errorf("runsc state of %s: no sandbox process", id)
	}
	ps := &isoProcs{}
	total, start, err := procCPU(st.Sandbox.Pid, id)
	if err != nil {
		return 0, err
	}
	ps.sandbox = procRef{pid: st.Sandbox.Pid, start: start}
	if st.GoferPid > 0 {
		// A gofer that has exited counts for nothing from then on: its CPU
		// stays in the cgroup's total, so one interval bills it (tens of ms).
		if g, start, err := procCPU(st.GoferPid, id); err == nil {
			total += g
			ps.gofer = procRef{pid: st.GoferPid, start: start}
		}
	}
	d.isoProcs.Store(id, ps)
	return total, nil
}

// isoProcs are a sandbox's two gVisor processes as isolationCPU found and
// checked them (in runsc's state file, in the sandbox's host cgroup), kept
// so that the next samples (every few seconds, for every sandbox) read only
// their /proc/PID/stat: no state file, no JSON, no cgroup file.
type isoProcs struct {
	sandbox procRef
	gofer   procRef // pid 0: none, or it has exited
}

// procRef is a host process: its pid and its start time (clock ticks after
// boot, /proc/PID/stat field 22), which together name one process for the
// host's uptime: a pid reused by another process has another start time.
type procRef struct {
	pid   int
	start uint64
}

// cpu returns the CPU seconds the two processes used, or ok false when
// the sandbox process is no longer the one that was checked (the sandbox
// was restored from a checkpoint, or ended): the caller reads the state
// file again. A gofer that exited or was replaced counts for nothing from
// then on, as in isolationCPU.
func (ps *isoProcs) cpu() (float64, bool) {
	total, ok := ps.sandbox.cpu()
	if !ok {
		return 0, false
	}
	if ps.gofer.pid > 0 {
		if g, ok := ps.gofer.cpu(); ok {
			total += g
		}
	}
	return total, true
}

// cpu returns the process's CPU seconds while it is still the process r
// names (ok false once it has gone or its pid names another process).
func (r procRef) cpu() (float64, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(r.pid) + "/stat")
	if err != nil {
		return 0, false
	}
	cpu, start, err := parseProcStat(stat)
	if err != nil || start != r.start {
		return 0, false
	}
	return cpu, true
}

// platformFlag returns the value of a --platform flag in flags ("" if none).
func platformFlag(flags []string) string {
	p := ""
	for i, f := range flags {
		f = "--" + strings.TrimLeft(f, "-")
		if v, ok := strings.CutPrefix(f, "--platform="); ok {
			p = v
		} else if f == "--platform" && i+1 < len(flags) {
			p = flags[i+1]
		}
	}
	return p
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Runtime runs on.
const clockTicks = 100

// procCPU returns the CPU seconds (user + system, all threads) that host
// process pid has used and its start time (see procRef), after checking
// that it is in sandbox id's host cgroup.
func procCPU(pid int, id string) (float64, uint64, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	cg, err := os.ReadFile(dir + "/cgroup")
	if err != nil {
		return 0, 0, err
	}
	if !inSandboxCgroup(cg, id) {
		return 0, 0, fmt.Errorf("process %d is not in sandbox %s's cgroup", pid, id)
	}
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseProcStat(stat)
}

// inSandboxCgroup says whether a /proc/PID/cgroup file puts the process in
// sandbox id's cgroup (/withruntime/<id>) in the hierarchy that counts CPU:
// cgroup v1's cpuacct controller, or else the v2 unified hierarchy.
func inSandboxCgroup(cgroupFile []byte, id string) bool {
	want := "/withruntime/" + id
	unified := ""
	for _, line := range strings.Split(strings.TrimSpace(string(cgroupFile)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return false
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "cpuacct" {
				return parts[2] == want
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			unified = parts[2]
		}
	}
	return unified == want
}

// parseProcStat reads utime + stime (fields 14 and 15, clock ticks), in
// seconds, and the start time (field 22, clock ticks after boot) of a
// /proc/PID/stat line. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from its closing parenthesis.
func parseProcStat(stat []byte) (cpu float64, start uint64, err error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state): utime is field 14, f[11]; starttime 22, f[19].
	if len(f) < 20 {
		return 0, 0, errors.New("/proc stat: too few fields")
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, fmt.Errorf("/proc stat: %w", err)
	}
	return float64(u+s) / clockTicks, start, nil
}
