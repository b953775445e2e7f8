package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"withruntime.dev/runtime/bench/internal/apiclient"
	"withruntime.dev/runtime/bench/internal/bare"
	"withruntime.dev/runtime/bench/internal/benchenv"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/server"
)

// The run's fixed names, so that a later run sweeps what a killed one left
// (they differ from every other user's: "wr" is the default server's,
// wrbs[cpmk]/wbs[cpmk] the suite's, wbe/wbp/wbi the egress benchmark's).
const (
	workDir    = "/tmp/wr-bench-scale"
	egressName = "wrbsl" // nftables table and namespace prefix
	linkPrefix = "wbsl"  // host veth prefix
	// bareCgroupParent is the cgroup parent of the bare runsc sandboxes.
	bareCgroupParent = "withruntime-bench-scale"
)

type hostInfo struct {
	CPUs          int    `json:"cpus"`
	MemTotalMiB   int64  `json:"memTotalMiB"`
	MemAvailMiB   int64  `json:"memAvailableMiB"`
	Kernel        string `json:"kernel"`
	Runsc         string `json:"runsc"`
	PidMax        int64  `json:"pidMax"`
	ThreadsMax    int64  `json:"threadsMax"`
	RunscFlagsEnv string `json:"runscFlagsEnv,omitempty"`
}

func hostInfoNow(runsc string) hostInfo {
	return hostInfo{CPUs: runtime.NumCPU(), MemTotalMiB: benchenv.Meminfo("MemTotal") >> 20, MemAvailMiB: benchenv.Meminfo("MemAvailable") >> 20,
		PidMax: benchenv.ReadInt("/proc/sys/kernel/pid_max"), ThreadsMax: benchenv.ReadInt("/proc/sys/kernel/threads-max"),
		RunscFlagsEnv: os.Getenv("WITHRUNTIME_RUNSC_FLAGS"), Kernel: benchenv.KernelRelease(), Runsc: benchenv.RunscVersion(runsc)}
}

// env is one run: the binaries, the server and what it measured.
type env struct {
	o     options
	runsc string
	agent string
	res   *results

	served *benchenv.Served
	srv    *server.Server
	c      *apiclient.Client

	// bare runs the bare runsc baseline; bareExec is its exec rows (one
	// bare sandbox, first and second exec among BareN), nil until measured.
	bare     *bare.Runner
	bareExec []*row
}

func newEnv(o options) (*env, error) {
	runsc, err := benchenv.FindRunsc()
	if err != nil {
		return nil, err
	}
	e := &env{o: o, runsc: runsc,
		bare: &bare.Runner{Runsc: runsc, Dir: filepath.Join(workDir, "bare"), CgroupParent: bareCgroupParent}}
	if err := e.sweep(); err != nil {
		return nil, fmt.Errorf("sweeping an earlier run's leftovers: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(workDir, "bin"), 0o700); err != nil {
		return nil, err
	}
	// The agent is built from this checkout (WITHRUNTIME_AGENT overrides).
	if e.agent, err = benchenv.BuildAgent(context.Background(), filepath.Join(workDir, "bin")); err != nil {
		return nil, err
	}
	if e.bare.Rootfs, err = benchenv.BaseRootfs(o.Templates); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *env) dataDir() string { return filepath.Join(workDir, "server") }

// open starts the server: production defaults (networks, metering), no
// warm pool (every create in the run is a cold boot), MaxSandboxes raised
// to hold N plus the churn.
func (e *env) open(ctx context.Context) error {
	limits := sandbox.DefaultLimits()
	limits.MaxSandboxes = e.o.N + e.o.ChurnConc + 16
	cfg := server.Config{
		DataDir: e.dataDir(), TemplatesDir: e.o.Templates,
		Runsc: e.runsc, Agent: e.agent, Limits: &limits,
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Pool: sandbox.PoolConfig{Size: 0},
	}
	if e.o.Network {
		cfg.Egress = server.EgressConfig{Name: egressName, LinkPrefix: linkPrefix}
	} else {
		cfg.Egress.Disabled = true
	}
	s, err := benchenv.Serve(ctx, cfg, httpClient, healthClient)
	if err != nil {
		return err
	}
	e.served, e.srv, e.c = s, s.Srv, s.C
	return nil
}

// deleteEverything deletes every sandbox the server runs through the API
// (8 at a time), then through the manager for any a failed request left.
// It returns how many the API deleted and how long that took.
func (e *env) deleteEverything() (int, time.Duration, error) {
	if e.srv == nil {
		return 0, 0, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var errList []error
	ids, err := e.c.ListRunning(ctx)
	if err != nil {
		errList = append(errList, err)
	}
	t := time.Now()
	if err := e.c.DeleteAll(ctx, ids, 8); err != nil {
		errList = append(errList, err)
	}
	took := time.Since(t)
	e.srv.Manager.DestroyAll(ctx)
	return len(ids), took, errors.Join(errList...)
}

// teardown deletes every sandbox, closes the server, checks what it left,
// then sweeps whatever is left anyway. It is safe to call more than once.
func (e *env) teardown() error {
	var errList []error
	if e.srv != nil {
		if _, _, err := e.deleteEverything(); err != nil {
			errList = append(errList, err)
		}
		e.c.Remember(benchenv.DriverIDs(e.runsc, e.dataDir())...)
		if err := e.served.Stop(); err != nil {
			errList = append(errList, err)
		}
		e.srv = nil
		chk := e.leakCheck("after deleting every sandbox and closing the server")
		e.res.Checks = append(e.res.Checks, chk)
		if len(chk.Left) > 0 {
			errList = append(errList, fmt.Errorf("%s: left %s", chk.Name, strings.Join(chk.Left, ", ")))
		}
	}
	if err := e.sweep(); err != nil {
		errList = append(errList, err)
	}
	if left := leftovers(); len(left) > 0 {
		errList = append(errList, fmt.Errorf("left on the host after the sweep: %s", strings.Join(left, ", ")))
	}
	return errors.Join(errList...)
}

// leakCheck lists what the server left: runsc containers in its root,
// sandbox directories, the cgroups of every sandbox id it ever had, host
// processes whose command line names the run's directory, and its network
// namespaces and veths.
func (e *env) leakCheck(when string) benchenv.Check {
	chk := benchenv.Check{Name: "scale server, " + when, Left: []string{}}
	chk.Left = append(chk.Left, benchenv.ServerLeftovers(e.runsc, e.dataDir(), e.c.Known())...)
	self := os.Getpid()
	for pid, cmd := range benchenv.ProcIndex() {
		if pid != self && strings.Contains(cmd, workDir+"/") {
			chk.Left = append(chk.Left, fmt.Sprintf("process %d (%.60s)", pid, cmd))
		}
	}
	chk.Left = append(chk.Left, benchenv.NetLeftovers(egressName, linkPrefix, false)...)
	slices.Sort(chk.Left)
	return chk
}

// sweep removes whatever a run leaves on the host: sandboxes under the
// data directory (and their cgroups), the namespaces, veths and nftables
// table, bare runsc sandboxes and their cgroups, and the work directory.
func (e *env) sweep() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var errList []error
	if err := benchenv.SweepServer(ctx, e.runsc, e.dataDir(), egressName, linkPrefix); err != nil {
		errList = append(errList, err)
	}
	if err := e.bare.Sweep(); err != nil {
		errList = append(errList, err)
	}
	if err := os.RemoveAll(workDir); err != nil {
		errList = append(errList, err)
	}
	return errors.Join(errList...)
}

// leftovers lists what of the run's remains on the host after a sweep.
func leftovers() []string {
	left := benchenv.NetLeftovers(egressName, linkPrefix, true)
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + bareCgroupParent)
	for _, d := range dirs {
		left = append(left, "cgroup "+d)
	}
	if _, err := os.Stat(workDir); err == nil {
		left = append(left, workDir)
	}
	return left
}

// httpClient and healthClient are the API client's: keep-alive
// connections to loopback, and health probes on connections of their own.
var (
	httpClient   = &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}}
	healthClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}, Timeout: 30 * time.Second}
)

// create makes a sandbox with a 6 h lease and returns its id (also on an
// error after the server made it, for the caller to delete).
func (e *env) create(ctx context.Context) (string, error) {
	return e.c.Create(ctx, api.CreateSandboxRequest{TimeoutSeconds: 6 * 3600})
}
