// Command metering measures the overhead of usage metering: with 50 idle
// sandboxes running, the round trip of a collected exec of `true` and the
// CPU used by the server, with metering off and on (the default 5 s interval,
// and 1 s to magnify it). Each configuration gets its own in-process server
// on a fresh data dir; its sandboxes are destroyed before the next starts.
// It prints medians and ratios (on vs off) and writes the samples as JSON.
//
// CPU is read with getrusage: RUSAGE_SELF (the server, plus this program's
// HTTP client, the same in every configuration) and RUSAGE_CHILDREN (runsc
// invocations the server ran and reaped, e.g. `runsc events` when a sandbox's
// cgroup cannot be read). Host CPU (all processes, /proc/stat) is also shown,
// since sampling can cost inside the runsc sandboxes too.
//
// Run it with bench/run.sh (as root, after scripts/install.sh).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/server"
)

type config struct {
	Name     string        `json:"name"`
	Interval time.Duration `json:"intervalNs"` // negative: metering off
}

type cpu struct {
	SelfSec     float64 `json:"selfSec"`     // RUSAGE_SELF utime+stime
	ChildrenSec float64 `json:"childrenSec"` // RUSAGE_CHILDREN utime+stime
	HostSec     float64 `json:"hostSec"`     // busy CPU seconds, all cores (/proc/stat)
	WindowSec   float64 `json:"windowSec"`
}

func (c cpu) serverPct() float64 { return 100 * (c.SelfSec + c.ChildrenSec) / c.WindowSec }
func (c cpu) hostPct() float64   { return 100 * c.HostSec / c.WindowSec }

type result struct {
	Config    config    `json:"config"`
	Sandboxes int       `json:"sandboxes"`
	IdleCPU   cpu       `json:"idleCPU"` // no requests at all
	ExecCPU   cpu       `json:"execCPU"` // while exec'ing in a loop
	SamplesMs []float64 `json:"samplesMs"`
	MedianMs  float64   `json:"medianMs"`
	P90Ms     float64   `json:"p90Ms"`
}

func main() {
	n := flag.Int("sandboxes", 50, "idle sandboxes per configuration")
	idle := flag.Duration("idle", 10*time.Second, "idle window (CPU only)")
	window := flag.Duration("window", 20*time.Second, "exec window (round trip and CPU)")
	minRuns := flag.Int("min-runs", 50, "minimum exec samples per configuration")
	out := flag.String("out", "bench/results/metering.json", "where to write the JSON results")
	templates := flag.String("templates", "/var/lib/withruntime/templates", "templates directory (base must be built)")
	flag.Parse()
	configs := []config{
		{"metering off", -1},
		{"metering on, 5 s (default)", sandbox.DefaultMeterInterval},
		{"metering on, 1 s", time.Second},
	}
	var results []result
	for _, cf := range configs {
		fmt.Fprintf(os.Stderr, "metering: %s ...\n", cf.Name)
		r, err := runConfig(cf, *n, *idle, *window, *minRuns, *templates)
		if err != nil {
			fmt.Fprintln(os.Stderr, "metering:", err)
			os.Exit(1)
		}
		results = append(results, r)
	}
	print(results)
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "metering:", err)
		os.Exit(1)
	}
	data, _ := json.MarshalIndent(map[string]any{"at": time.Now().UTC(), "sandboxes": *n,
		"idleWindowSec": idle.Seconds(), "execWindowSec": window.Seconds(), "results": results}, "", "  ")
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "metering:", err)
		os.Exit(1)
	}
}

func runConfig(cf config, n int, idle, window time.Duration, minRuns int, templates string) (res result, err error) {
	res = result{Config: cf, Sandboxes: n}
	ctx := context.Background()
	dir, err := os.MkdirTemp("/tmp", "wr-bench-meter-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	srv, err := server.Open(ctx, server.Config{DataDir: dir, TemplatesDir: templates,
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metering: sandbox.MeterConfig{Interval: cf.Interval}})
	if err != nil {
		return res, err
	}
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go srv.Serve(sctx, l)
	c := &apiClient{base: "http://" + l.Addr().String(), key: srv.LocalKey}

	// Create the sandboxes, a few at a time; destroy every one created, even
	// on error.
	var (
		mu   sync.Mutex
		ids  []string
		errc = make(chan error, n)
		sem  = make(chan struct{}, 4)
		wg   sync.WaitGroup
	)
	defer func() {
		var dwg sync.WaitGroup
		for _, id := range ids {
			dwg.Add(1)
			sem <- struct{}{}
			go func(id string) {
				defer func() { <-sem; dwg.Done() }()
				if e := c.delete(id); e != nil {
					mu.Lock()
					if err == nil {
						err = e
					}
					mu.Unlock()
				}
			}(id)
		}
		dwg.Wait()
	}()
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			id, err := c.create()
			if err != nil {
				errc <- err
				return
			}
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errc)
	if e := <-errc; e != nil {
		return res, e
	}
	// Warm every sandbox's exec path once.
	for _, id := range ids {
		if _, err := c.execTrue(id); err != nil {
			return res, err
		}
	}

	// Idle window: nothing but the server's own work (metering, leases).
	start := takeCPU()
	time.Sleep(idle)
	res.IdleCPU = start.since()

	// Exec window: round robin over the sandboxes, one at a time.
	start = takeCPU()
	t0 := time.Now()
	for i := 0; time.Since(t0) < window || i < minRuns; i++ {
		d, err := c.execTrue(ids[i%len(ids)])
		if err != nil {
			return res, err
		}
		res.SamplesMs = append(res.SamplesMs, float64(d.Microseconds())/1000)
	}
	res.ExecCPU = start.since()
	res.MedianMs, res.P90Ms = summarize(res.SamplesMs)
	return res, nil
}

type cpuMark struct {
	at             time.Time
	self, children float64
	hostBusy       float64
}

func takeCPU() cpuMark {
	return cpuMark{at: time.Now(), self: rusage(syscall.RUSAGE_SELF), children: rusage(syscall.RUSAGE_CHILDREN), hostBusy: hostBusy()}
}

func (m cpuMark) since() cpu {
	now := takeCPU()
	return cpu{SelfSec: now.self - m.self, ChildrenSec: now.children - m.children,
		HostSec: now.hostBusy - m.hostBusy, WindowSec: now.at.Sub(m.at).Seconds()}
}

func rusage(who int) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// hostBusy is the host's non-idle CPU time in seconds (first line of
// /proc/stat, minus idle and iowait; USER_HZ assumed 100).
func hostBusy() float64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	var busy float64
	for i, s := range f[1:] {
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest times are already in user
			continue
		}
		v, _ := strconv.ParseFloat(s, 64)
		busy += v
	}
	return busy / 100
}

func print(rs []result) {
	off := rs[0]
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "config (%d idle sandboxes)\texec median ms\texec p90 ms\truns\tmedian vs off\tidle server CPU %%\tvs off\tidle host CPU %%\tvs off\texec-window server CPU %%\tvs off\t\n", off.Sandboxes)
	for i, r := range rs {
		base := i == 0
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%d\t%s\t%.2f\t%s\t%.2f\t%s\t%.1f\t%s\t\n", r.Config.Name,
			r.MedianMs, r.P90Ms, len(r.SamplesMs), ratio(r.MedianMs, off.MedianMs, base),
			r.IdleCPU.serverPct(), ratio(r.IdleCPU.serverPct(), off.IdleCPU.serverPct(), base),
			r.IdleCPU.hostPct(), ratio(r.IdleCPU.hostPct(), off.IdleCPU.hostPct(), base),
			r.ExecCPU.serverPct(), ratio(r.ExecCPU.serverPct(), off.ExecCPU.serverPct(), base))
	}
	tw.Flush()
	fmt.Println("server CPU = getrusage SELF+CHILDREN (server in-process, incl. this program's client); % of one core")
}

func ratio(a, b float64, base bool) string {
	if base {
		return "1.00x"
	}
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func summarize(samples []float64) (median, p90 float64) {
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	median = s[len(s)/2]
	if len(s)%2 == 0 {
		median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	i := (len(s)*9+9)/10 - 1 // nearest rank
	return median, s[i]
}

type apiClient struct{ base, key string }

func (c *apiClient) do(method, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	return b, nil
}

func (c *apiClient) create() (string, error) {
	b, err := c.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{MemoryMiB: 128, CPU: 0.25, DiskMiB: 256, TimeoutSeconds: 900})
	if err != nil {
		return "", err
	}
	var sb api.Sandbox
	if err := json.Unmarshal(b, &sb); err != nil {
		return "", err
	}
	return sb.ID, nil
}

func (c *apiClient) delete(id string) error {
	_, err := c.do("DELETE", "/v1/sandboxes/"+id, nil)
	return err
}

// execTrue times a collected POST /exec of `true`, request to full response.
func (c *apiClient) execTrue(id string) (time.Duration, error) {
	start := time.Now()
	b, err := c.do("POST", "/v1/sandboxes/"+id+"/exec", agentapi.ExecRequest{Argv: []string{"true"}})
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	var r agentapi.ExecResult
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("exec: %w: %s", err, b)
	}
	if r.ExitCode != 0 {
		return 0, fmt.Errorf("exec true: exit %d", r.ExitCode)
	}
	return d, nil
}
