package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/driver/gvisor"
	"withruntime.dev/runtime/internal/egress"
	"withruntime.dev/runtime/internal/egress/firewall"
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
	bare   *bare
	res    *results

	mu      sync.Mutex
	servers []*benchServer
}

func newEnv(ctx context.Context, o options) (*env, error) {
	runsc := os.Getenv("WITHRUNTIME_RUNSC")
	if runsc == "" {
		p, err := exec.LookPath("runsc")
		if err != nil {
			return nil, errors.New("runsc not found: set WITHRUNTIME_RUNSC or run scripts/install.sh")
		}
		runsc = p
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
	e.agent = os.Getenv("WITHRUNTIME_AGENT")
	if e.agent == "" {
		e.agent = filepath.Join(workDir, "bin", "withruntime-agent")
		build := exec.CommandContext(ctx, "go", "build", "-o", e.agent, "withruntime.dev/runtime/cmd/withruntime-agent")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the agent: %w: %s", err, out)
		}
	}
	tpl := filepath.Join(o.Templates, "base", "rootfs")
	if _, err := os.Stat(filepath.Join(tpl, "usr", "bin", "python3")); err != nil {
		return nil, fmt.Errorf("template base not built under %s (scripts/install.sh builds it): %w", o.Templates, err)
	}
	e.rootfs = tpl
	e.bare = &bare{runsc: runsc, rootfs: tpl, dir: filepath.Join(workDir, "bare"), network: false}
	if err := os.MkdirAll(e.bare.dir, 0o700); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *env) hostInfo() hostInfo {
	h := hostInfo{CPUs: runtime.NumCPU(), MemTotalMiB: meminfo("MemTotal") >> 20}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if out, err := exec.Command(e.runsc, "--version").Output(); err == nil {
		h.Runsc = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	return h
}

// benchServer is one in-process server serving on loopback.
type benchServer struct {
	kind   serverKind
	srv    *server.Server
	cancel context.CancelFunc
	done   chan struct{}
	c      *apiClient
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
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &benchServer{kind: kind, srv: srv, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = srv.Serve(sctx, l)
	}()
	s.c = newAPIClient("http://"+l.Addr().String(), srv.LocalKey)
	e.mu.Lock()
	e.servers = append(e.servers, s)
	e.mu.Unlock()
	return s, nil
}

// closeServer deletes every sandbox the server runs (through the API, then
// the manager for any a cancelled request left), closes it (which destroys
// the pooled sandboxes) and reports what it left on the host.
func (e *env) closeServer(s *benchServer) (check, error) {
	if s.closed {
		return check{}, nil
	}
	s.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errList []error
	ids, err := s.c.listRunning(ctx)
	if err != nil {
		errList = append(errList, err)
	}
	if err := s.c.deleteAll(ctx, ids, 4); err != nil {
		errList = append(errList, err)
	}
	s.srv.Manager.DestroyAll(ctx)
	// Pooled sandboxes have no record: remember their ids from the driver
	// so that the leak check looks for their cgroups too.
	s.c.remember(driverIDs(e.runsc, s.dataDir())...)
	s.cancel()
	<-s.done
	if err := s.srv.Close(); err != nil {
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
func (e *env) leakCheck(s *benchServer, when string) check {
	chk := check{Name: s.kind.name + " server, " + when, Left: []string{}}
	dd := s.dataDir()
	live := driverIDs(e.runsc, dd)
	s.c.remember(live...)
	out, _ := exec.Command(e.runsc, "--root", filepath.Join(dd, "gvisor", "runsc"), "list", "--quiet").Output()
	for _, id := range strings.Fields(string(out)) {
		chk.Left = append(chk.Left, "runsc container "+id)
	}
	entries, _ := os.ReadDir(filepath.Join(dd, "gvisor", "sandboxes"))
	for _, en := range entries {
		chk.Left = append(chk.Left, "sandbox directory "+en.Name())
	}
	for _, id := range s.c.known() {
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/withruntime/" + id)
		for _, d := range dirs {
			chk.Left = append(chk.Left, "cgroup "+d)
		}
	}
	// A running server removes stopped sandboxes' networks in the
	// background: wait for that; its prepared networks are its own.
	var prepared []string
	if !s.closed {
		s.srv.Manager.WaitNetworkTeardown()
		prepared = s.srv.Manager.PreparedNetworks()
	}
	for _, l := range netLeftovers(s.kind, false) {
		if !slices.ContainsFunc(prepared, func(id string) bool {
			return l == "network namespace "+s.kind.egressName+"-"+id || l == "link "+(netns.Config{LinkPrefix: s.kind.linkPrefix}).HostIfName(id)
		}) {
			chk.Left = append(chk.Left, l)
		}
	}
	slices.Sort(chk.Left)
	return chk
}

// netLeftovers lists a server kind's network namespaces and veths (and,
// with table, its nftables table, which a closed server keeps).
func netLeftovers(k serverKind, table bool) []string {
	var left []string
	entries, _ := os.ReadDir("/run/netns")
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), k.egressName+"-") {
			left = append(left, "network namespace "+en.Name())
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, k.linkPrefix) {
			left = append(left, "link "+i.Name)
		}
	}
	if table {
		if fw, err := firewall.New(k.egressName, k.linkPrefix); err == nil {
			if ok, _ := fw.Exists(); ok {
				left = append(left, "nftables table inet "+k.egressName)
			}
		}
	}
	return left
}

// driverIDs lists the sandboxes a data directory's driver knows: runsc
// containers and sandbox directories.
func driverIDs(runsc, dataDir string) []string {
	var ids []string
	out, _ := exec.Command(runsc, "--root", filepath.Join(dataDir, "gvisor", "runsc"), "list", "--quiet").Output()
	ids = append(ids, strings.Fields(string(out))...)
	entries, _ := os.ReadDir(filepath.Join(dataDir, "gvisor", "sandboxes"))
	for _, en := range entries {
		ids = append(ids, en.Name())
	}
	return ids
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
		state := filepath.Join(workDir, k.name, "gvisor")
		if _, err := os.Stat(state); err == nil {
			d, err := gvisor.New(gvisor.Config{Runsc: e.runsc, AgentBinary: "/dev/null", StateDir: state})
			if err != nil {
				errList = append(errList, err)
			} else {
				ids, _ := d.List(ctx)
				for _, id := range ids {
					if err := d.Destroy(ctx, id); err != nil {
						errList = append(errList, err)
					}
				}
				_ = d.Close()
			}
		}
		if m, err := egress.New(egress.Config{Name: k.egressName, LinkPrefix: k.linkPrefix}); err != nil {
			errList = append(errList, err)
		} else if err := m.Destroy(ctx); err != nil {
			errList = append(errList, err)
		}
	}
	if err := e.removeImageTemplate(ctx); err != nil {
		errList = append(errList, err)
	}
	b := &bare{runsc: e.runsc, dir: filepath.Join(workDir, "bare")}
	if err := b.sweep(); err != nil {
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
		left = append(left, netLeftovers(k, true)...)
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
