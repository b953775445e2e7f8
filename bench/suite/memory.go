package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/bench/internal/benchenv"
	"withruntime.dev/runtime/bench/internal/stats"
	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/sandbox"
)

// sandboxMem is what one sandbox costs the host, from its processes and
// its memory cgroup.
type sandboxMem struct {
	Procs        int              `json:"procs"`        // host processes (gofer, sentry, systrap stubs)
	Tasks        int64            `json:"tasks"`        // host tasks (threads) in its pids cgroup
	TasksBy      map[string]int64 `json:"tasksBy"`      // threads of its processes by role: gofer, sentry, stubs
	OutsideCg    int              `json:"outsideCg"`    // of them, not in the sandbox's memory cgroup
	RSS          int64            `json:"rss"`          // Σ Rss (smaps_rollup)
	PSS          int64            `json:"pss"`          // Σ Pss: shared pages split among all that map them
	CgUsage      int64            `json:"cgUsage"`      // memory.usage_in_bytes (v2: memory.current)
	CgKernel     int64            `json:"cgKernel"`     // memory.kmem.usage_in_bytes (v2: kernel)
	CgCache      int64            `json:"cgCache"`      // page cache and shmem charged (v2: file)
	CgMapped     int64            `json:"cgMapped"`     // of it, mapped by a process (v2: file_mapped)
	Attributed   int64            `json:"attributed"`   // PSS + kernel + unmapped cache
	CPUNanos     int64            `json:"cpuNanos"`     // CPU over the idle window (cpuacct)
	CgroupMissed bool             `json:"cgroupMissed"` // the cgroup could not be read
}

// memory holds K idle sandboxes at once (each created through the API and
// used once, by an exec of `true`), plus a few idle bare runsc sandboxes,
// and measures what each costs the host in memory and in CPU over an idle
// window; then deletes them all and checks that nothing is left.
func (e *env) memory(ctx context.Context, window time.Duration) (err error) {
	k := e.o.Idle
	limits := sandbox.DefaultLimits()
	limits.MaxSandboxes = k + 16
	srv, err := e.openServer(ctx, memKind, 0, &limits)
	if err != nil {
		return err
	}
	defer func() { // deletes whatever an error left, then checks
		if cerr := e.closeAndCheck(srv); cerr != nil && err == nil {
			err = cerr
		}
	}()
	var bareIDs []string
	defer func() {
		for _, id := range bareIDs {
			if derr := e.bare.Destroy(id); derr != nil && err == nil {
				err = derr
			}
		}
	}()
	const sec = "memory"
	runtime.GC()
	avail0 := benchenv.Meminfo("MemAvailable")
	heap0 := heapInuse()

	// K sandboxes, four creates at a time.
	var (
		mu       sync.Mutex
		ids      []string
		creates  []time.Duration
		failures []string
		done     int
	)
	fmt.Fprintf(os.Stderr, "suite: memory: creating %d sandboxes\n", k)
	cwall, err := benchenv.FanOut(ctx, 4, k, func() {
		t := time.Now()
		id, err := srv.c.Create(ctx, api.CreateSandboxRequest{TimeoutSeconds: 3600})
		d := time.Since(t)
		if err == nil {
			_, err = srv.c.ExecCollected(ctx, id, []string{"true"}, "")
		}
		mu.Lock()
		defer mu.Unlock()
		if id != "" {
			ids = append(ids, id)
		}
		if err != nil {
			failures = append(failures, err.Error())
			return
		}
		creates = append(creates, d)
		if done++; done%50 == 0 {
			fmt.Fprintf(os.Stderr, "suite: memory: %d/%d\n", done, k)
		}
	})
	if err != nil {
		return err
	}
	if len(failures) > 0 {
		return fmt.Errorf("%d of %d creates failed, e.g. %s", len(failures), k, failures[0])
	}
	runtime.GC()
	avail1 := benchenv.Meminfo("MemAvailable")
	heap1 := heapInuse()
	rc := e.add(sampleRow(sec, fmt.Sprintf("API create while filling to %d, 4 at once", k), "ms", stats.MSSamples(creates)))
	rc.Value, rc.ValueUnit = stats.F64(float64(len(creates))/cwall.Seconds()), "sandboxes/s"
	rc.Vs = fmt.Sprintf("%d created in %.0f s", len(creates), cwall.Seconds())

	// The baseline: idle bare runsc sandboxes (sleep infinity), alongside,
	// so that shared pages are split among as many processes.
	for i := 0; i < e.o.BareIdle; i++ {
		id, err := e.bare.Start(ctx, "idle")
		if err != nil {
			return err
		}
		bareIDs = append(bareIDs, id)
		if e.o.BareExec { // used once, as the Runtime sandboxes are
			if _, err := e.bare.Exec(ctx, id, []string{"true"}, ""); err != nil {
				return err
			}
		}
	}
	if err := benchenv.SleepCtx(ctx, 5*time.Second); err != nil { // let boot work settle
		return err
	}

	// Idle CPU: each sandbox's cgroup CPU time over the window, and the
	// server's (this process's) own.
	rtCg := func(id string) string { return "withruntime/" + id }
	bareCg := func(id string) string { return bareCgroupParent + "/" + id }
	cpu0 := map[string]int64{}
	for _, id := range ids {
		cpu0[id], _ = cgroupCPU(rtCg(id))
	}
	for _, id := range bareIDs {
		cpu0[id], _ = cgroupCPU(bareCg(id))
	}
	self0 := benchenv.RusageSelf()
	w0 := time.Now()
	if err := benchenv.SleepCtx(ctx, window); err != nil {
		return err
	}
	cpuSec := time.Since(w0).Seconds()
	selfCPU := benchenv.RusageSelf() - self0
	cpuPct := func(id, cg string) (float64, error) {
		v, err := cgroupCPU(cg)
		if err != nil {
			return 0, err
		}
		return 100 * float64(v-cpu0[id]) / 1e9 / cpuSec, nil
	}

	// Memory.
	procs := benchenv.ProcIndex()
	measure := func(id, key, cg string) (sandboxMem, float64, error) {
		m := sandboxMem{}
		pids := map[int]bool{}
		inCg := map[int]bool{}
		for _, pid := range cgroupProcs(cg) {
			pids[pid], inCg[pid] = true, true
		}
		for pid, cmd := range procs {
			if strings.Contains(cmd, key) {
				pids[pid] = true
			}
		}
		for pid := range pids {
			rss, pss, err := smapsRollup(pid)
			if err != nil {
				continue // gone
			}
			m.Procs++
			if !inCg[pid] {
				m.OutsideCg++
			}
			m.RSS += rss
			m.PSS += pss
		}
		if err := cgroupMem(cg, &m); err != nil {
			m.CgroupMissed = true
		}
		m.Tasks, _ = cgroupTasks(cg)
		m.TasksBy = tasksByRole(pids)
		m.Attributed = m.PSS + m.CgKernel + max(0, m.CgCache-m.CgMapped)
		pct, err := cpuPct(id, cg)
		m.CPUNanos = int64(pct / 100 * cpuSec * 1e9)
		return m, pct, err
	}
	var rtMem, bareMem []sandboxMem
	var rtAttr, rtCgU, rtPSS, rtCPU, rtTasks, bAttr, bCgU, bPSS, bCPU, bTasks []float64
	outside, missed := 0, 0
	for _, id := range ids {
		m, pct, err := measure(id, "/sandboxes/"+id, rtCg(id))
		if err != nil {
			return fmt.Errorf("sandbox %s: %w", id, err)
		}
		rtMem = append(rtMem, m)
		rtAttr, rtCgU, rtPSS, rtCPU = append(rtAttr, benchenv.MiB(m.Attributed)), append(rtCgU, benchenv.MiB(m.CgUsage)), append(rtPSS, benchenv.MiB(m.PSS)), append(rtCPU, pct)
		rtTasks = append(rtTasks, float64(m.Tasks))
		outside += m.OutsideCg
		if m.CgroupMissed || m.Procs == 0 {
			missed++
		}
	}
	for _, id := range bareIDs {
		m, pct, err := measure(id, filepath.Join(e.bare.Dir, id), bareCg(id))
		if err != nil {
			return fmt.Errorf("bare sandbox %s: %w", id, err)
		}
		bareMem = append(bareMem, m)
		bAttr, bCgU, bPSS, bCPU = append(bAttr, benchenv.MiB(m.Attributed)), append(bCgU, benchenv.MiB(m.CgUsage)), append(bPSS, benchenv.MiB(m.PSS)), append(bCPU, pct)
		bTasks = append(bTasks, float64(m.Tasks))
	}
	if missed > 0 {
		e.note("memory: %d sandboxes' processes or cgroup could not be read", missed)
	}
	if outside > 0 {
		e.note("memory: %d runsc processes were outside their sandbox's memory cgroup (their PSS is counted)", outside)
	}
	held := len(ids)
	rA := e.add(sampleRow(sec, fmt.Sprintf("host memory per idle sandbox (%d held)", held), "MiB", rtAttr))
	rA.Value, rA.ValueUnit = stats.F64(stats.Sum(rtAttr)), "MiB total"
	rCg := e.add(sampleRow(sec, "  of which: memory cgroup usage", "MiB", rtCgU))
	rCg.Value, rCg.ValueUnit = stats.F64(stats.Sum(rtCgU)), "MiB total"
	rP := e.add(sampleRow(sec, "  of which: PSS of its runsc processes", "MiB", rtPSS))
	rP.Value, rP.ValueUnit = stats.F64(stats.Sum(rtPSS)), "MiB total"
	mean := stats.Sum(rtAttr) / float64(max(1, held))
	rFit := e.add(&row{Section: sec, Name: "idle sandboxes a 24 GiB host holds", Unit: "",
		Value: stats.F64(24 * 1024 / mean), ValueUnit: "sandboxes"})
	rFit.Vs = fmt.Sprintf("24 GiB ÷ mean %.1f MiB; this host's MemAvailable before: %.0f", mean, float64(avail0)/(1<<20)/mean)
	drop := float64(avail0-avail1) / (1 << 20) / float64(max(1, held))
	rDrop := e.add(&row{Section: sec, Name: "host MemAvailable drop per sandbox", Unit: "",
		Value: stats.F64(drop), ValueUnit: "MiB"})
	rDrop.Vs = "whole host, noisy (other users)"
	rCPU := e.add(sampleRow(sec, fmt.Sprintf("idle CPU per sandbox over %.0f s", cpuSec), "% core", rtCPU))
	rCPU.Value, rCPU.ValueUnit = stats.F64(stats.Sum(rtCPU)), "% core total"
	rT := e.add(sampleRow(sec, "host tasks (threads) per idle sandbox", "tasks", rtTasks))
	rT.Value, rT.ValueUnit = stats.F64(stats.Sum(rtTasks)), "tasks total"
	if pidMax := benchenv.ReadInt("/proc/sys/kernel/pid_max"); pidMax > 0 && stats.Sum(rtTasks) > 0 {
		meanTasks := stats.Sum(rtTasks) / float64(held)
		rPid := e.add(&row{Section: sec, Name: "idle sandboxes kernel.pid_max allows", Unit: "",
			Value: stats.F64(float64(pidMax) / meanTasks), ValueUnit: "sandboxes"})
		rPid.Vs = fmt.Sprintf("pid_max %d ÷ mean %.1f tasks (before anything else on the host)", pidMax, meanTasks)
	}
	if len(bareIDs) > 0 {
		used := ""
		if e.o.BareExec {
			used = ", each used once (runsc exec true)"
		}
		bA := e.add(sampleRow(sec, fmt.Sprintf("idle bare runsc sandbox (%d held alongside%s)", len(bareIDs), used), "MiB", bAttr))
		bA.Baseline, bA.Short = true, "bare runsc"
		bCg := e.add(sampleRow(sec, "  of which: memory cgroup usage", "MiB", bCgU))
		bCg.Baseline, bCg.Short = true, "bare runsc"
		bP := e.add(sampleRow(sec, "  of which: PSS of its runsc processes", "MiB", bPSS))
		bP.Baseline, bP.Short = true, "bare runsc"
		bC := e.add(sampleRow(sec, "idle CPU per bare runsc sandbox", "% core", bCPU))
		bC.Baseline, bC.Short = true, "bare runsc"
		bT := e.add(sampleRow(sec, "host tasks per bare runsc sandbox", "tasks", bTasks))
		bT.Baseline, bT.Short = true, "bare runsc"
		compare(rT, bT)
		againstRuntime(bT, map[string]*row{"": rT}, "")
		compare(rA, bA)
		compare(rCg, bCg)
		compare(rP, bP)
		compare(rCPU, bC)
		againstRuntime(bA, map[string]*row{"": rA}, "")
		againstRuntime(bCg, map[string]*row{"": rCg}, "")
		againstRuntime(bP, map[string]*row{"": rP}, "")
		againstRuntime(bC, map[string]*row{"": rCPU}, "")
	}
	var rss int64
	for _, m := range rtMem {
		rss += m.RSS
	}
	if len(rtMem) > 0 && len(bareMem) > 0 {
		// The agent's own threads (PID 1's, inside), read after the
		// measurements: this exec may itself add one.
		var res agentapi.ExecResult
		agentThreads := "?"
		if err := srv.c.GetJSON(ctx, "POST", "/v1/sandboxes/"+ids[0]+"/exec", agentapi.ExecRequest{
			Argv: []string{"sh", "-c", "echo $(ls /proc/1/task | wc -l), $(nproc) CPUs"}, User: "root"}, &res); err == nil && res.ExitCode == 0 {
			agentThreads = strings.TrimSpace(res.Stdout)
		}
		e.note("memory: host threads of the first sandbox by role: %s (its agent's threads inside, read after: %s); of the first bare runsc sandbox: %s",
			roles(rtMem[0].TasksBy), agentThreads, roles(bareMem[0].TasksBy))
	}
	e.note("memory: per idle sandbox: RSS %.1f MiB (counts shared pages in full); server CPU (this process) over the idle window %.2f%% of a core; server Go heap %+.1f KiB per sandbox",
		benchenv.MiB(rss)/float64(max(1, held)), 100*selfCPU/cpuSec, float64(heap1-heap0)/1024/float64(max(1, held)))
	e.res.Memory = &memoryDetail{Runtime: rtMem, Bare: bareMem, IDs: ids, BareIDs: bareIDs,
		MemAvailableBefore: avail0, MemAvailableAfter: avail1, WindowSec: cpuSec, ServerCPUSec: selfCPU}

	// Delete them all, four at a time, and check that nothing is left.
	t := time.Now()
	derr := srv.c.DeleteAll(context.WithoutCancel(ctx), ids, 4)
	e.note("memory: deleted %d sandboxes in %.1f s (4 at once)", held, time.Since(t).Seconds())
	if derr != nil {
		return derr
	}
	for _, id := range bareIDs {
		if err := e.bare.Destroy(id); err != nil {
			return err
		}
	}
	bareIDs = nil
	chk := e.leakCheck(srv, "after deleting the idle sandboxes")
	if left := e.bare.List(); len(left) > 0 {
		chk.Left = append(chk.Left, "bare runsc containers "+strings.Join(left, " "))
	}
	for _, d := range e.bare.Cgroups() {
		chk.Left = append(chk.Left, "bare cgroup "+d)
	}
	e.res.Checks = append(e.res.Checks, chk)
	return nil
}

// memoryDetail is the memory section's per-sandbox figures, in the JSON.
type memoryDetail struct {
	Runtime            []sandboxMem `json:"runtime"`
	Bare               []sandboxMem `json:"bare"`
	IDs                []string     `json:"ids"`
	BareIDs            []string     `json:"bareIds"`
	MemAvailableBefore int64        `json:"memAvailableBefore"`
	MemAvailableAfter  int64        `json:"memAvailableAfter"`
	WindowSec          float64      `json:"windowSec"`
	ServerCPUSec       float64      `json:"serverCpuSec"`
}

func heapInuse() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// smapsRollup returns a process's Rss and Pss in bytes.
func smapsRollup(pid int) (rss, pss int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	found := false
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "Rss":
			rss, found = n<<10, true
		case "Pss":
			pss = n << 10
		}
	}
	if !found {
		return 0, 0, errors.New("no Rss in smaps_rollup")
	}
	return rss, pss, nil
}

// cgroupV2 reports whether the host has the unified hierarchy only.
func cgroupV2() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// cgroupProcs lists the processes in a sandbox's memory cgroup (path
// relative to the hierarchy's root).
func cgroupProcs(rel string) []int {
	dir := "/sys/fs/cgroup/memory/" + rel
	if cgroupV2() {
		dir = "/sys/fs/cgroup/" + rel
	}
	data, _ := os.ReadFile(dir + "/cgroup.procs")
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// cgroupMem reads a sandbox's memory cgroup.
func cgroupMem(rel string, m *sandboxMem) error {
	readInt := func(p string) (int64, error) {
		b, err := os.ReadFile(p)
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	stat := func(p string) map[string]int64 {
		out := map[string]int64{}
		data, _ := os.ReadFile(p)
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 {
				out[f[0]], _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
		return out
	}
	var err error
	if cgroupV2() {
		dir := "/sys/fs/cgroup/" + rel
		if m.CgUsage, err = readInt(dir + "/memory.current"); err != nil {
			return err
		}
		st := stat(dir + "/memory.stat")
		m.CgKernel, m.CgCache, m.CgMapped = st["kernel"], st["file"], st["file_mapped"]
		return nil
	}
	dir := "/sys/fs/cgroup/memory/" + rel
	if m.CgUsage, err = readInt(dir + "/memory.usage_in_bytes"); err != nil {
		return err
	}
	m.CgKernel, _ = readInt(dir + "/memory.kmem.usage_in_bytes")
	st := stat(dir + "/memory.stat")
	m.CgCache, m.CgMapped = st["cache"], st["mapped_file"]
	return nil
}

// cgroupCPU returns a cgroup's CPU time in nanoseconds.
func cgroupCPU(rel string) (int64, error) {
	if cgroupV2() {
		data, err := os.ReadFile("/sys/fs/cgroup/" + rel + "/cpu.stat")
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "usage_usec" {
				n, err := strconv.ParseInt(f[1], 10, 64)
				return n * 1000, err
			}
		}
		return 0, errors.New("no usage_usec in cpu.stat")
	}
	b, err := os.ReadFile("/sys/fs/cgroup/cpuacct/" + rel + "/cpuacct.usage")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// cgroupTasks returns the host tasks (threads) in a sandbox's pids cgroup.
func cgroupTasks(rel string) (int64, error) {
	p := "/sys/fs/cgroup/pids/" + rel + "/pids.current"
	if cgroupV2() {
		p = "/sys/fs/cgroup/" + rel + "/pids.current"
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// tasksByRole counts the threads (/proc/PID/task) of a sandbox's host
// processes by role: "gofer" and "sentry" by their command line (runsc
// gofer, runsc boot), "stubs" every other (systrap's stub processes, which
// run the sandbox's threads).
func tasksByRole(pids map[int]bool) map[string]int64 {
	out := map[string]int64{}
	for pid := range pids {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			continue // gone
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.Split(string(cmd), "\x00")
		role := "stubs"
		if len(ents) > 0 {
			out["stub processes"]++
		}
		switch {
		case slices.Contains(args, "gofer"):
			role = "gofer"
			out["stub processes"]--
		case slices.Contains(args, "boot"):
			role = "sentry"
			out["stub processes"]--
		}
		out[role] += int64(len(ents))
	}
	return out
}

// roles formats tasksByRole's counts.
func roles(m map[string]int64) string {
	return fmt.Sprintf("gofer %d, sentry %d, stubs %d (in %d processes)", m["gofer"], m["sentry"], m["stubs"], m["stub processes"])
}
