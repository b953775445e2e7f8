package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/bench/internal/apiclient"
	"withruntime.dev/runtime/bench/internal/benchenv"
	"withruntime.dev/runtime/bench/internal/stats"
)

// serverUse is what the server (this process: the in-process server and
// the benchmark's own HTTP client) used at each point of the run.
type serverUse struct {
	RSSBeforeMiB     float64 `json:"rssBeforeMiB"`
	RSSHeldMiB       float64 `json:"rssHeldMiB"`
	RSSAfterMiB      float64 `json:"rssAfterMiB"`
	HeapBeforeMiB    float64 `json:"heapBeforeMiB"`
	HeapHeldMiB      float64 `json:"heapHeldMiB"`
	IdleCPUPct       float64 `json:"idleCpuPct"`
	ExecCPUPct       float64 `json:"execCpuPct"`
	ChurnCPUPct      float64 `json:"churnCpuPct"`
	StoreBeforeBytes int64   `json:"storeBeforeBytes"`
	StoreHeldBytes   int64   `json:"storeHeldBytes"`
	StoreAfterBytes  int64   `json:"storeAfterBytes"`
	MemAvailDropMiB  float64 `json:"memAvailableDropMiB"`
	Goroutines       int     `json:"goroutinesHeld"`
}

// prober polls GET /v1/health every 100 ms and files each sample under
// the phase current at its start.
type prober struct {
	mu      sync.Mutex
	phase   string
	samples map[string][]time.Duration
	errs    map[string]int
	order   []string
}

func (p *prober) set(phase string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phase = phase
	if _, ok := p.samples[phase]; !ok {
		p.order = append(p.order, phase)
		p.samples[phase] = nil
	}
}

func (p *prober) run(ctx context.Context, c *apiclient.Client) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		phase := p.phase
		p.mu.Unlock()
		d, err := c.HealthOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		if err != nil {
			p.errs[phase]++
		} else {
			p.samples[phase] = append(p.samples[phase], d)
		}
		p.mu.Unlock()
	}
}

// scale runs the phases; the caller tears down.
func (e *env) scale(ctx context.Context, idleWindow time.Duration) error {
	o := e.o
	u := &e.res.Server
	runtime.GC()
	avail0 := benchenv.Meminfo("MemAvailable")
	if err := e.open(ctx); err != nil {
		return err
	}
	u.RSSBeforeMiB, u.HeapBeforeMiB, u.StoreBeforeBytes = selfRSS(), heapMiB(), storeBytes(e.dataDir())

	pr := &prober{samples: map[string][]time.Duration{}, errs: map[string]int{}}
	pctx, stopProbe := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() { defer pwg.Done(); pr.run(pctx, e.c) }()
	defer func() {
		stopProbe()
		pwg.Wait()
		for _, ph := range pr.order {
			r := e.add(sampleRow("health", "GET /v1/health, "+ph, "ms", stats.MSSamples(pr.samples[ph])))
			r.Failures = pr.errs[ph]
			r.Vs = "every 100 ms"
		}
	}()

	// 1. The baseline: exec into the only sandbox on the host.
	pr.set("one sandbox")
	fmt.Fprintf(os.Stderr, "scale: exec into one sandbox (%d samples)\n", o.Execs)
	first, err := e.create(ctx)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if err := e.waitQuiet(ctx, "the one-sandbox baseline"); err != nil {
		return err
	}
	var one []time.Duration
	for i := 0; i < o.Execs+3; i++ {
		d, err := e.c.ExecTrue(ctx, first)
		if err != nil {
			return err
		}
		if i >= 3 { // three unrecorded rounds first
			one = append(one, d)
		}
	}
	oneRow := e.add(sampleRow("exec", "API exec true, one sandbox on the host", "ms", stats.MSSamples(one)))
	oneRow.Short = "one sandbox"

	// 2. Fill to N (the first counts), each used once by an exec of true.
	pr.set(fmt.Sprintf("filling to %d", o.N))
	fmt.Fprintf(os.Stderr, "scale: creating %d sandboxes, %d at once\n", o.N-1, o.FillConc)
	var (
		mu       sync.Mutex
		ids      = []string{first}
		creates  []time.Duration
		failures []string
	)
	wall, err := benchenv.FanOut(ctx, o.FillConc, o.N-1, func() {
		t := time.Now()
		id, err := e.create(ctx)
		d := time.Since(t)
		if err == nil {
			_, err = e.c.ExecTrue(ctx, id)
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
		if n := len(creates) + 1; n%100 == 0 {
			fmt.Fprintf(os.Stderr, "scale: %d/%d held (MemAvailable %.1f GiB)\n", n, o.N, benchenv.GiB(benchenv.Meminfo("MemAvailable")))
		}
	})
	rc := e.add(sampleRow("fill", fmt.Sprintf("API create while filling to %d, %d at once", o.N, o.FillConc), "ms", stats.MSSamples(creates)))
	rc.Failures = len(failures)
	if wall > 0 {
		rc.Value, rc.ValueUnit = stats.F64(float64(len(creates))/wall.Seconds()), "sandboxes/s"
		rc.Vs = fmt.Sprintf("%d created in %.0f s", len(creates), wall.Seconds())
	}
	if err != nil {
		return err
	}
	if len(failures) > 0 {
		return fmt.Errorf("%d of %d creates failed, e.g. %s", len(failures), o.N-1, failures[0])
	}

	// 3. Held idle: the server's memory, CPU and store.
	pr.set(fmt.Sprintf("%d idle", o.N))
	if err := benchenv.SleepCtx(ctx, 5*time.Second); err != nil { // boot work settles
		return err
	}
	runtime.GC()
	u.RSSHeldMiB, u.HeapHeldMiB, u.StoreHeldBytes = selfRSS(), heapMiB(), storeBytes(e.dataDir())
	u.Goroutines = runtime.NumGoroutine()
	u.MemAvailDropMiB = benchenv.MiB(avail0 - benchenv.Meminfo("MemAvailable"))
	var tasks, cgMem []float64
	for _, id := range ids {
		if n := benchenv.ReadInt(cgroupFile("pids", id, "pids.current")); n > 0 {
			tasks = append(tasks, float64(n))
		}
		if b := benchenv.ReadInt(cgroupFile("memory", id, "memory.usage_in_bytes")); b > 0 {
			cgMem = append(cgMem, benchenv.MiB(b))
		}
	}
	rt := e.add(sampleRow("idle", fmt.Sprintf("host tasks (threads) per idle sandbox, %d held", o.N), "tasks", tasks))
	rt.Value, rt.ValueUnit, rt.Samples = stats.F64(stats.Sum(tasks)), "tasks total", nil
	rm := e.add(sampleRow("idle", fmt.Sprintf("memory cgroup usage per idle sandbox, %d held", o.N), "MiB", cgMem))
	rm.Value, rm.ValueUnit, rm.Samples = stats.F64(stats.Sum(cgMem)), "MiB total", nil
	rm.Vs = "bench/suite memory has the full figure"
	c0, t0 := benchenv.RusageSelf(), time.Now()
	if err := benchenv.SleepCtx(ctx, idleWindow); err != nil {
		return err
	}
	u.IdleCPUPct = 100 * (benchenv.RusageSelf() - c0) / time.Since(t0).Seconds()

	// 4. Exec into random idle sandboxes.
	pr.set(fmt.Sprintf("exec among %d", o.N))
	fmt.Fprintf(os.Stderr, "scale: exec into %d random sandboxes of %d\n", o.Execs, o.N)
	picks := pick(ids, o.Execs)
	// Each pick gets two execs: the first wakes a sandbox that idled since
	// the fill; the second, right after, is what the one-sandbox baseline
	// measures (a sandbox in use), so the two rows split the cost of
	// waking from the cost of the other N-1 on the host.
	var among, again []time.Duration
	c0, t0 = benchenv.RusageSelf(), time.Now()
	for _, id := range picks {
		d, err := e.c.ExecTrue(ctx, id)
		if err != nil {
			return err
		}
		d2, err := e.c.ExecTrue(ctx, id)
		if err != nil {
			return err
		}
		among, again = append(among, d), append(again, d2)
	}
	u.ExecCPUPct = 100 * (benchenv.RusageSelf() - c0) / time.Since(t0).Seconds()
	ra := e.add(sampleRow("exec", fmt.Sprintf("API exec true, a random one of %d idle (first exec after idling)", o.N), "ms", stats.MSSamples(among)))
	compare(ra, oneRow)
	rb := e.add(sampleRow("exec", fmt.Sprintf("API exec true, a random one of %d idle (second exec, right after)", o.N), "ms", stats.MSSamples(again)))
	compare(rb, oneRow)
	e.noteHostShare(ra, rb)

	// 5. Churn while they idle.
	if o.Churn > 0 {
		pr.set(fmt.Sprintf("churn at %d beside %d idle", o.ChurnConc, o.N))
		fmt.Fprintf(os.Stderr, "scale: create, exec, delete %d sandboxes at concurrency %d\n", o.Churn, o.ChurnConc)
		var lives []time.Duration
		var churnErrs []string
		c0, t0 = benchenv.RusageSelf(), time.Now()
		wall, err := benchenv.FanOut(ctx, o.ChurnConc, o.Churn, func() {
			d, err := e.lifecycle(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				churnErrs = append(churnErrs, err.Error())
				return
			}
			lives = append(lives, d)
		})
		u.ChurnCPUPct = 100 * (benchenv.RusageSelf() - c0) / time.Since(t0).Seconds()
		r := e.add(sampleRow("churn", fmt.Sprintf("create, exec true, delete at concurrency %d beside %d idle", o.ChurnConc, o.N), "ms", stats.MSSamples(lives)))
		r.Failures = len(churnErrs)
		if wall > 0 {
			r.Value, r.ValueUnit = stats.F64(float64(len(lives))/wall.Seconds()), "sandboxes/s"
		}
		if len(churnErrs) > 0 {
			r.Note = "first error: " + churnErrs[0]
		}
		if err != nil {
			return err
		}
		if len(churnErrs) > 0 {
			return fmt.Errorf("%d of %d churn lifecycles failed, e.g. %s", len(churnErrs), o.Churn, churnErrs[0])
		}
	}

	// 6. Delete them all; the leak check follows in teardown.
	pr.set("deleting all")
	fmt.Fprintf(os.Stderr, "scale: deleting every sandbox, 8 at once\n")
	n, took, err := e.deleteEverything()
	e.note("deleted %d sandboxes in %.1f s (8 at once, %.1f/s)", n, took.Seconds(), float64(n)/max(took.Seconds(), 1e-9))
	runtime.GC()
	u.RSSAfterMiB, u.StoreAfterBytes = selfRSS(), storeBytes(e.dataDir())
	return err
}

// lifecycle creates a sandbox, runs true in it and deletes it, also when
// the exec failed.
func (e *env) lifecycle(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	id, err := e.create(ctx)
	if err != nil {
		if id != "" {
			_ = e.c.Del(context.WithoutCancel(ctx), id)
		}
		return 0, fmt.Errorf("create: %w", err)
	}
	_, err = e.c.ExecTrue(ctx, id)
	derr := e.c.Del(context.WithoutCancel(ctx), id)
	switch {
	case err != nil:
		return 0, fmt.Errorf("exec: %w", err)
	case derr != nil:
		return 0, fmt.Errorf("delete: %w", derr)
	}
	return time.Since(start), nil
}

// pick returns k ids drawn at random (distinct while k ≤ len(ids)).
func pick(ids []string, k int) []string {
	out := make([]string, 0, k)
	for len(out) < k {
		perm := rand.Perm(len(ids))
		for _, i := range perm {
			if len(out) == k {
				break
			}
			out = append(out, ids[i])
		}
	}
	return out
}

// selfRSS is this process's VmRSS in MiB.
func selfRSS() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return float64(n) / 1024
			}
		}
	}
	return 0
}

func heapMiB() float64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return benchenv.MiB(int64(ms.HeapInuse))
}

// storeBytes is the size of the server's database files (runtime.db and
// its write-ahead log).
func storeBytes(dataDir string) int64 {
	matches, _ := filepath.Glob(filepath.Join(dataDir, "runtime.db*"))
	var n int64
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// cgroupFile is a file of sandbox id's host cgroup in controller (cgroup
// v1; on v2 the unified hierarchy's name for it).
func cgroupFile(controller, id, name string) string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		switch name {
		case "memory.usage_in_bytes":
			name = "memory.current"
		}
		return filepath.Join("/sys/fs/cgroup/withruntime", id, name)
	}
	return filepath.Join("/sys/fs/cgroup", controller, "withruntime", id, name)
}

// waitQuiet holds a baseline back until the host's CPU is quiet (at most
// 10% busy for two seconds, up to a minute) and notes how long that took:
// the bare phase's teardown of N sandboxes keeps the kernel busy for tens
// of seconds after the last destroy returns (seen at N = 1,000: the
// one-sandbox exec p99 449 ms and health p99 500 ms right after it, while
// the health p99 stayed 36 ms during the whole fill), which made the
// baseline the noisiest figure of the run.
func (e *env) waitQuiet(ctx context.Context, what string) error {
	waited, busy, err := benchenv.WaitQuiet(ctx, 0.10, time.Minute)
	if err != nil {
		return err
	}
	quiet := "quiet"
	if busy > 0.10 {
		quiet = "still busy after a minute"
	}
	e.note("before %s: waited %.1f s for the host's CPU (%s, %.0f%% busy)", what, waited.Seconds(), quiet, 100*busy)
	return nil
}
