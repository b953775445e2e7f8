// Command scale first measures the host's own share: `runsc exec true`
// among -bare-n (default N) idle bare runsc sandboxes against the same with
// one, all destroyed before the server starts. It then holds N idle
// sandboxes on one host through one in-process Runtime server (real gVisor
// sandboxes of the base template, sandbox networks and metering on, as
// `withruntime serve` runs them), then, while they idle:
//
//   - execs `true` into 100 sandboxes picked at random among them, and
//     compares that with the same exec measured before on a host holding
//     one sandbox;
//   - creates and deletes sandboxes (create, exec `true`, delete) at
//     concurrency 16;
//
// and polls GET /v1/health every 100 ms throughout. It reports the exec
// p50/p99 among N against one, the churn's rate and failures, the health
// p99 of every phase, the server's RSS and CPU, the store's size, and,
// after deleting everything, checks that nothing was left on the host.
//
// N defaults to 1,000, fewer when the host's free memory cannot hold that
// many: N = (MemAvailable − headroom) ÷ 20 MiB, headroom = max(2 GiB,
// MemTotal ÷ 10); an idle sandbox costs about 17.5 MiB of host memory
// (bench/suite memory) plus the server's share. -n sets it.
//
// Everything it creates lives under /tmp/wr-bench-scale, in the runsc root
// there, in cgroups named after its sandboxes, and in network namespaces,
// veths and an nftables table named wrbsl*/wbsl*. It is all removed at the
// end, on error and on SIGINT/SIGTERM/SIGHUP (a second signal says cleanup
// is still running); the names are fixed, so a run killed outright is swept
// by the next (two runs exclude each other with /tmp/wr-bench-scale.lock).
//
// Run it as root after scripts/install.sh: go run ./bench/scale [-n N]
// [-bare-n M].
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"withruntime.dev/runtime/bench/internal/benchenv"
)

type options struct {
	N           int     `json:"n"`
	NAuto       bool    `json:"nAuto"`
	NReason     string  `json:"nReason"`
	BareN       int     `json:"bareN"`
	Execs       int     `json:"execs"`
	FillConc    int     `json:"fillConcurrency"`
	Churn       int     `json:"churn"`
	ChurnConc   int     `json:"churnConcurrency"`
	IdleWindowS float64 `json:"idleWindowSec"`
	Network     bool    `json:"network"`
	Templates   string  `json:"templates"`
	Out         string  `json:"-"`
}

// perSandboxBudget and the headroom pick the default N from free memory.
const (
	perSandboxBudget = 20 << 20
	minHeadroom      = 2 << 30
	defaultMaxN      = 1000
	// tasksPerSandbox bounds the host tasks (threads) one idle sandbox
	// holds, for the kernel.pid_max / threads-max check (measured: 25-35).
	tasksPerSandbox = 48
)

func main() {
	var o options
	var idleWindow time.Duration
	flag.IntVar(&o.N, "n", 0, "idle sandboxes to hold (default: 1,000, or what free memory allows: (MemAvailable − max(2 GiB, MemTotal/10)) ÷ 20 MiB)")
	flag.IntVar(&o.BareN, "bare-n", -1, "idle bare runsc sandboxes for the baseline phase, run before the server's (default: N; 0 skips it)")
	flag.IntVar(&o.Execs, "execs", 100, "execs of true into random idle sandboxes (and into one sandbox alone, the baseline)")
	flag.IntVar(&o.FillConc, "fill-conc", 4, "creates at once while filling to N")
	flag.IntVar(&o.Churn, "churn", 64, "sandboxes created, used and deleted while the N idle")
	flag.IntVar(&o.ChurnConc, "churn-conc", 16, "concurrency of the churn")
	flag.DurationVar(&idleWindow, "idle-window", 10*time.Second, "window over which the server's idle CPU is measured")
	flag.BoolVar(&o.Network, "network", true, "sandbox networks on (the production default); false runs runsc --network=none")
	flag.StringVar(&o.Templates, "templates", "/var/lib/withruntime/templates", "templates directory (base must be built)")
	flag.StringVar(&o.Out, "out", "bench/results/scale.json", "where to write the JSON results (\"\": nowhere)")
	pprofAddr := flag.String("pprof", "", "serve net/http/pprof of this process (server included) on this address, e.g. 127.0.0.1:6060")
	flag.Parse()
	if *pprofAddr != "" {
		go func() { fatal(http.ListenAndServe(*pprofAddr, nil)) }()
	}
	o.IdleWindowS = idleWindow.Seconds()
	if o.Execs < 1 || o.FillConc < 1 || o.Churn < 0 || o.ChurnConc < 1 || o.N < 0 {
		fatal(errors.New("-execs, -fill-conc and -churn-conc must be at least 1, -n and -churn at least 0"))
	}
	if o.N == 0 {
		o.N, o.NReason = autoN()
		o.NAuto = true
	} else {
		o.NReason = "set by -n"
	}
	if o.N < 1 {
		fatal(fmt.Errorf("not enough free memory for even one sandbox (%s); set -n to force", o.NReason))
	}
	if o.BareN < 0 {
		o.BareN = o.N
	}
	if err := checkBareMem(o.N, o.BareN); err != nil {
		fatal(err)
	}
	if err := checkTasks(max(o.N, o.BareN)); err != nil {
		fatal(err)
	}

	signal.Ignore(syscall.SIGPIPE)
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		first := true
		for s := range sigs {
			if first {
				fmt.Fprintf(os.Stderr, "scale: %v: stopping; deleting every sandbox first\n", s)
				cancel()
				first = false
				continue
			}
			fmt.Fprintf(os.Stderr, "scale: %v: still cleaning up (kill -9 abandons it; the next run sweeps what is left)\n", s)
		}
	}()
	err := run(ctx, o, idleWindow)
	cancel()
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "scale:", err)
	os.Exit(1)
}

// autoN is the default N and why.
func autoN() (int, string) {
	total, avail := benchenv.Meminfo("MemTotal"), benchenv.Meminfo("MemAvailable")
	headroom := max(int64(minHeadroom), total/10)
	n := int((avail - headroom) / perSandboxBudget)
	why := fmt.Sprintf("MemAvailable %.1f GiB − headroom %.1f GiB, ÷ 20 MiB per sandbox = %d", benchenv.GiB(avail), benchenv.GiB(headroom), max(n, 0))
	if n > defaultMaxN {
		n = defaultMaxN
		why += fmt.Sprintf(", capped at %d", defaultMaxN)
	}
	return n, why
}

// checkBareMem refuses a bare N above N that the host's free memory
// cannot hold (each bare sandbox is budgeted as a Runtime one; the two sets
// are never held at once, so up to N always fits when N does).
func checkBareMem(n, bareN int) error {
	if bareN <= n {
		return nil
	}
	total, avail := benchenv.Meminfo("MemTotal"), benchenv.Meminfo("MemAvailable")
	if fit := int((avail - max(int64(minHeadroom), total/10)) / perSandboxBudget); bareN > fit {
		return fmt.Errorf("-bare-n %d: free memory holds about %d (MemAvailable %.1f GiB, 20 MiB each, headroom kept): lower -bare-n",
			bareN, max(fit, 0), benchenv.GiB(avail))
	}
	return nil
}

// checkTasks refuses an N whose host tasks would not fit under
// kernel.pid_max or kernel.threads-max.
func checkTasks(n int) error {
	need := int64(n) * tasksPerSandbox
	for _, f := range []string{"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"} {
		limit := benchenv.ReadInt(f)
		if limit > 0 && need > limit/2 {
			return fmt.Errorf("%d sandboxes need about %d host tasks, more than half of %s (%d): raise it (scripts/install.sh does) or lower -n",
				n, need, f, limit)
		}
	}
	return nil
}

// results is what the JSON file holds.
type results struct {
	At      time.Time        `json:"at"`
	Options options          `json:"options"`
	Host    hostInfo         `json:"host"`
	Rows    []*row           `json:"rows"`
	Checks  []benchenv.Check `json:"checks"`
	Notes   []string         `json:"notes"`
	Server  serverUse        `json:"server"`
	Error   string           `json:"error,omitempty"`
}

func run(ctx context.Context, o options, idleWindow time.Duration) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("needs root (runsc, cgroups, namespaces, nftables)")
	}
	lock, err := os.OpenFile(workDir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("another scale run holds %s: %w", lock.Name(), err)
	}
	defer os.Remove(lock.Name()) // while still holding it
	raiseNofile()

	e, err := newEnv(o)
	if err != nil {
		return err
	}
	res := &results{At: time.Now().UTC(), Options: o, Host: hostInfoNow(e.runsc)}
	e.res = res
	fmt.Fprintf(os.Stderr, "scale: N = %d (%s)\n", o.N, o.NReason)
	var runErr error
	if o.BareN > 0 {
		runErr = e.bareScale(ctx)
	}
	if runErr == nil {
		runErr = e.scale(ctx, idleWindow)
	}
	// Teardown gets its own time, also after a signal cancelled ctx.
	if cerr := e.teardown(); cerr != nil {
		runErr = errors.Join(runErr, fmt.Errorf("teardown: %w", cerr))
	}
	if runErr != nil {
		res.Error = runErr.Error()
	}
	printTable(os.Stdout, res)
	if o.Out != "" {
		if werr := writeJSON(o.Out, res); werr != nil {
			runErr = errors.Join(runErr, werr)
		} else {
			fmt.Fprintf(os.Stderr, "scale: wrote %s\n", o.Out)
		}
	}
	return runErr
}

func writeJSON(path string, res *results) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(res, "", "  ")
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func raiseNofile() {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < rl.Max {
		rl.Cur = rl.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
}
