package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/driver/gvisor"
	"withruntime.dev/runtime/internal/egress"
	"withruntime.dev/runtime/internal/egress/firewall"
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
	h := hostInfo{CPUs: runtime.NumCPU(), MemTotalMiB: meminfo("MemTotal") >> 20, MemAvailMiB: meminfo("MemAvailable") >> 20,
		PidMax: readInt("/proc/sys/kernel/pid_max"), ThreadsMax: readInt("/proc/sys/kernel/threads-max"),
		RunscFlagsEnv: os.Getenv("WITHRUNTIME_RUNSC_FLAGS")}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if out, err := exec.Command(runsc, "--version").Output(); err == nil {
		h.Runsc = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	}
	return h
}

// env is one run: the binaries, the server and what it measured.
type env struct {
	o     options
	runsc string
	agent string
	res   *results

	srv    *server.Server
	c      *apiClient
	cancel context.CancelFunc
	done   chan struct{}
}

func newEnv(o options) (*env, error) {
	runsc := os.Getenv("WITHRUNTIME_RUNSC")
	if runsc == "" {
		p, err := exec.LookPath("runsc")
		if err != nil {
			return nil, errors.New("runsc not found: set WITHRUNTIME_RUNSC or run scripts/install.sh")
		}
		runsc = p
	}
	e := &env{o: o, runsc: runsc}
	if err := e.sweep(); err != nil {
		return nil, fmt.Errorf("sweeping an earlier run's leftovers: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(workDir, "bin"), 0o700); err != nil {
		return nil, err
	}
	// The agent is built from this checkout (WITHRUNTIME_AGENT overrides).
	e.agent = os.Getenv("WITHRUNTIME_AGENT")
	if e.agent == "" {
		e.agent = filepath.Join(workDir, "bin", "withruntime-agent")
		build := exec.Command("go", "build", "-o", e.agent, "withruntime.dev/runtime/cmd/withruntime-agent")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the agent: %w: %s", err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(o.Templates, "base", "rootfs", "usr", "bin", "python3")); err != nil {
		return nil, fmt.Errorf("template base not built under %s (scripts/install.sh builds it): %w", o.Templates, err)
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
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return err
	}
	sctx, cancel := context.WithCancel(context.Background())
	e.srv, e.cancel, e.done = srv, cancel, make(chan struct{})
	go func() {
		defer close(e.done)
		_ = srv.Serve(sctx, l)
	}()
	e.c = newAPIClient("http://"+l.Addr().String(), srv.LocalKey)
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
	ids, err := e.c.listRunning(ctx)
	if err != nil {
		errList = append(errList, err)
	}
	t := time.Now()
	if err := e.c.deleteAll(ctx, ids, 8); err != nil {
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
		e.c.remember(driverIDs(e.runsc, e.dataDir())...)
		e.cancel()
		<-e.done
		if err := e.srv.Close(); err != nil {
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
func (e *env) leakCheck(when string) check {
	chk := check{Name: "scale server, " + when, Left: []string{}}
	dd := e.dataDir()
	out, _ := exec.Command(e.runsc, "--root", filepath.Join(dd, "gvisor", "runsc"), "list", "--quiet").Output()
	for _, id := range strings.Fields(string(out)) {
		chk.Left = append(chk.Left, "runsc container "+id)
	}
	entries, _ := os.ReadDir(filepath.Join(dd, "gvisor", "sandboxes"))
	for _, en := range entries {
		chk.Left = append(chk.Left, "sandbox directory "+en.Name())
	}
	for _, id := range e.c.known() {
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/withruntime/" + id)
		for _, d := range dirs {
			chk.Left = append(chk.Left, "cgroup "+d)
		}
	}
	self := os.Getpid()
	for pid, cmd := range procIndex() {
		if pid != self && strings.Contains(cmd, workDir+"/") {
			chk.Left = append(chk.Left, fmt.Sprintf("process %d (%.60s)", pid, cmd))
		}
	}
	chk.Left = append(chk.Left, netLeftovers(false)...)
	slices.Sort(chk.Left)
	return chk
}

// netLeftovers lists the run's network namespaces and veths (and, with
// table, its nftables table, which a closed server keeps).
func netLeftovers(table bool) []string {
	var left []string
	entries, _ := os.ReadDir("/run/netns")
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), egressName+"-") {
			left = append(left, "network namespace "+en.Name())
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, linkPrefix) {
			left = append(left, "link "+i.Name)
		}
	}
	if table {
		if fw, err := firewall.New(egressName, linkPrefix); err == nil {
			if ok, _ := fw.Exists(); ok {
				left = append(left, "nftables table inet "+egressName)
			}
		}
	}
	return left
}

// driverIDs lists the sandboxes the data directory's driver knows.
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

// sweep removes whatever a run leaves on the host: sandboxes under the
// data directory (and their cgroups), the namespaces, veths and nftables
// table, and the work directory.
func (e *env) sweep() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var errList []error
	state := filepath.Join(e.dataDir(), "gvisor")
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
	if m, err := egress.New(egress.Config{Name: egressName, LinkPrefix: linkPrefix}); err != nil {
		errList = append(errList, err)
	} else if err := m.Destroy(ctx); err != nil {
		errList = append(errList, err)
	}
	if err := os.RemoveAll(workDir); err != nil {
		errList = append(errList, err)
	}
	return errors.Join(errList...)
}

// leftovers lists what of the run's remains on the host after a sweep.
func leftovers() []string {
	left := netLeftovers(true)
	if _, err := os.Stat(workDir); err == nil {
		left = append(left, workDir)
	}
	return left
}

// meminfo returns a /proc/meminfo field in bytes.
func meminfo(key string) int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

func readInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// procIndex maps every process on the host to its command line.
func procIndex() map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + en.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		out[pid] = strings.ReplaceAll(string(b), "\x00", " ")
	}
	return out
}

func gib(b int64) float64 { return float64(b) / (1 << 30) }
func mib(b int64) float64 { return float64(b) / (1 << 20) }
