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
	"sync"
	"time"

	"withruntime.dev/runtime/bench/internal/apiclient"
	"withruntime.dev/runtime/bench/internal/bare"
	"withruntime.dev/runtime/bench/internal/benchenv"
	"withruntime.dev/runtime/internal/egress/netns"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/server"
	"withruntime.dev/runtime/internal/template"
)

const workDir = "/tmp/wr-bench-suite"

// serverKind names one of the suite's servers: its data directory under
// workDir and its (fixed, so that a later run can sweep them) sandbox
// network names. Link prefixes differ from every other user's ("wr" is the
// default server's, "wbe"/"wbp"/"wbi" the egress benchmark's).
type serverKind struct {
	name       string // data directory under workDir
	egressName string // nftables table and namespace prefix
	linkPrefix string // host veth prefix
}

var (
	coldKind = serverKind{"cold", "wrbsc", "wbsc"} // no pool: startup cold, exec, concurrency
	poolKind = serverKind{"pool", "wrbsp", "wbsp"} // a warm pool: startup pooled
	memKind  = serverKind{"mem", "wrbsm", "wbsm"}  // raised MaxSandboxes: memory
	allKinds = []serverKind{coldKind, poolKind, memKind, codeKind, burstKind}
)

// bareCgroupParent is the cgroup parent of the bare runsc baselines.
const bareCgroupParent = "withruntime-bench-suite"

// env is one run: binaries, the template's root, the servers it started and
// the bare runsc baselines.
type env struct {
	o      options
	runsc  string
	agent  string
	rootfs string
	bare   *bare.Runner
	res    *results

	mu      sync.Mutex
	servers []*benchServer
}

func newEnv(ctx context.Context, o options) (*env, error) {
	runsc, err := benchenv.FindRunsc()
	if err != nil {
		return nil, err
	}
	e := &env{o: o, runsc: runsc}
	// Leftovers of a run killed outright.
	if err := e.sweep(); err != nil {
		return nil, fmt.Errorf("sweeping an earlier run's leftovers: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(workDir, "bin"), 0o700); err != nil {
		return nil, err
	}
	// The agent is built from this checkout, so the sandboxes run the same
	// code as the in-process server (WITHRUNTIME_AGENT overrides).
	if e.agent, err = benchenv.BuildAgent(ctx, filepath.Join(workDir, "bin")); err != nil {
		return nil, err
	}
	tpl, err := benchenv.BaseRootfs(o.Templates)
	if err != nil {
		return nil, err
	}
	e.rootfs = tpl
	e.bare = &bare.Runner{Runsc: runsc, Rootfs: tpl, Dir: filepath.Join(workDir, "bare"), CgroupParent: bareCgroupParent}
	if err := os.MkdirAll(e.bare.Dir, 0o700); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *env) hostInfo() hostInfo {
	return hostInfo{CPUs: runtime.NumCPU(), MemTotalMiB: benchenv.Meminfo("MemTotal") >> 20,
		Kernel: benchenv.KernelRelease(), Runsc: benchenv.RunscVersion(e.runsc)}
}

// benchServer is one in-process server serving on loopback.
type benchServer struct {
	kind   serverKind
	served *benchenv.Served
	srv    *server.Server
	c      *apiclient.Client
	closed bool
}

func (s *benchServer) dataDir() string { return filepath.Join(workDir, s.kind.name) }

// openServer starts a server of kind with the given pool size and limits.
func (e *env) openServer(ctx context.Context, kind serverKind, poolSize int, limits *sandbox.Limits) (*benchServer, error) {
	cfg := server.Config{
		DataDir: filepath.Join(workDir, kind.name), TemplatesDir: e.o.Templates,
		Runsc: e.runsc, Agent: e.agent, Limits: limits,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		// As `withruntime serve` runs it by default.
		Pool: sandbox.PoolConfig{Size: poolSize, Max: max(poolSize, sandbox.DefaultPoolMax), NetworkSlots: sandbox.DefaultNetworkSlots},
	}
	if kind == codeKind {
		cfg.Pool.Templates = []string{template.CodeInterpreter}
	}
	if e.o.Network {
		cfg.Egress = server.EgressConfig{Name: kind.egressName, LinkPrefix: kind.linkPrefix}
	} else {
		cfg.Egress.Disabled = true
	}
	served, err := benchenv.Serve(ctx, cfg, httpClient, nil)
	if err != nil {
		return nil, err
	}
	s := &benchServer{kind: kind, served: served, srv: served.Srv, c: served.C}
	e.mu.Lock()
	e.servers = append(e.servers, s)
	e.mu.Unlock()
	return s, nil
}

// closeServer deletes every sandbox the server runs (through the API, then
// the manager for any a cancelled request left), closes it (which destroys
// the pooled sandboxes) and reports what it left on the host.
func (e *env) closeServer(s *benchServer) (benchenv.Check, error) {
	if s.closed {
		return benchenv.Check{}, nil
	}
	s.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errList []error
	ids, err := s.c.ListRunning(ctx)
	if err != nil {
		errList = append(errList, err)
	}
	if err := s.c.DeleteAll(ctx, ids, 4); err != nil {
		errList = append(errList, err)
	}
	s.srv.Manager.DestroyAll(ctx)
	// Pooled sandboxes have no record: remember their ids from the driver
	// so that the leak check looks for their cgroups too.
	s.c.Remember(benchenv.DriverIDs(e.runsc, s.dataDir())...)
	if err := s.served.Stop(); err != nil {
		errList = append(errList, err)
	}
	chk := e.leakCheck(s, "after closing the "+s.kind.name+" server")
	return chk, errors.Join(errList...)
}

// leakCheck lists what a server left: runsc containers in its root,
// directories under its sandboxes directory, the cgroups of every sandbox
// id it ever had (the cgroup parent is shared with other servers on the
// host, so only this server's ids are looked for), and its network
// namespaces and veths.
func (e *env) leakCheck(s *benchServer, when string) benchenv.Check {
	chk := benchenv.Check{Name: s.kind.name + " server, " + when, Left: []string{}}
	dd := s.dataDir()
	live := benchenv.DriverIDs(e.runsc, dd)
	s.c.Remember(live...)
	chk.Left = append(chk.Left, benchenv.ServerLeftovers(e.runsc, dd, s.c.Known())...)
	// A running server removes stopped sandboxes' networks in the
	// background: wait for that; its prepared networks are its own.
	var prepared []string
	if !s.closed {
		s.srv.Manager.WaitNetworkTeardown()
		prepared = s.srv.Manager.PreparedNetworks()
	}
	for _, l := range benchenv.NetLeftovers(s.kind.egressName, s.kind.linkPrefix, false) {
		if !slices.ContainsFunc(prepared, func(id string) bool {
			return l == "network namespace "+s.kind.egressName+"-"+id || l == "link "+(netns.Config{LinkPrefix: s.kind.linkPrefix}).HostIfName(id)
		}) {
			chk.Left = append(chk.Left, l)
		}
	}
	slices.Sort(chk.Left)
	return chk
}

// cleanup closes every server still open, then sweeps.
func (e *env) cleanup() error {
	var errList []error
	e.mu.Lock()
	servers := slices.Clone(e.servers)
	e.mu.Unlock()
	for _, s := range servers {
		chk, err := e.closeServer(s)
		if err != nil {
			errList = append(errList, err)
		}
		if len(chk.Left) > 0 {
			e.res.Checks = append(e.res.Checks, chk)
			errList = append(errList, fmt.Errorf("%s: left %s", chk.Name, strings.Join(chk.Left, ", ")))
		}
	}
	if err := e.sweep(); err != nil {
		errList = append(errList, err)
	}
	if left := e.leftovers(); len(left) > 0 {
		errList = append(errList, fmt.Errorf("left on the host after the sweep: %s", strings.Join(left, ", ")))
	}
	return errors.Join(errList...)
}

// sweep removes whatever a run leaves on the host: sandboxes under every
// server's data directory, bare runsc containers and their cgroups, the
// servers' namespaces, veths and nftables tables, and the work directory.
func (e *env) sweep() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errList []error
	for _, k := range allKinds {
		if err := benchenv.SweepServer(ctx, e.runsc, filepath.Join(workDir, k.name), k.egressName, k.linkPrefix); err != nil {
			errList = append(errList, err)
		}
	}
	if err := e.removeImageTemplate(ctx); err != nil {
		errList = append(errList, err)
	}
	b := &bare.Runner{Runsc: e.runsc, Dir: filepath.Join(workDir, "bare"), CgroupParent: bareCgroupParent}
	if err := b.Sweep(); err != nil {
		errList = append(errList, err)
	}
	if err := os.RemoveAll(workDir); err != nil {
		errList = append(errList, err)
	}
	return errors.Join(errList...)
}

// leftovers lists what of the suite's remains on the host after a sweep.
func (e *env) leftovers() []string {
	var left []string
	for _, k := range allKinds {
		left = append(left, benchenv.NetLeftovers(k.egressName, k.linkPrefix, true)...)
	}
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + bareCgroupParent)
	for _, d := range dirs {
		left = append(left, "cgroup "+d)
	}
	if _, err := os.Stat(workDir); err == nil {
		left = append(left, workDir)
	}
	return left
}

// httpClient is shared by the API clients: keep-alive connections to
// loopback, enough of them for the concurrency section.
var httpClient = &http.Client{Transport: &http.Transport{
	MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute,
}}
