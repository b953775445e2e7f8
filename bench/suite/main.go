// Command suite is Runtime's benchmark suite. It starts real in-process
// Runtime servers on loopback (real gVisor sandboxes from the base
// template, sandbox networks on as in production), measures, in the same
// run, baselines that do the same work without Runtime, prints one table
// and writes every sample as JSON (bench/results/suite.json).
//
// Sections (-only picks some):
//
//	startup      create-to-first-output of python3 -c 'print(6*7)' through
//	             the API, cold and from the warm pool (and the pool's
//	             refill time); baselines: a bare `runsc run` of an equal
//	             bundle, bubblewrap over the same root, the host's python3
//	claim        the first, second and third streamed exec of the python3
//	             in a just-claimed pooled sandbox while the pool refills;
//	             baseline: the same in a sandbox that has run all along
//	exec         collected exec round trip of `true` and of the python3 on a
//	             running sandbox; baseline: `runsc exec` into a running bare
//	             runsc sandbox
//	concurrency  sandboxes per second (create, exec true, delete) at
//	             concurrency 1, 4 and 16, failures counted, leak check;
//	             baseline: bare `runsc run` of `true` at the same concurrency
//	memory       host memory and idle CPU of K idle sandboxes held at once;
//	             baseline: idle bare runsc sandboxes measured alongside
//	image        the base rootfs imported as a container image (template
//	             bench-suite-image, deleted at the end): the import's time,
//	             and create-to-first-output from it against base, cold
//	pause        pause time, resume→first output of python3 and the image's
//	             size, of an idle sandbox and of one holding 200 MiB of
//	             Python objects (at most 10 samples); baseline: cold
//	             create→first output measured alongside
//	snapshot     snapshot time and image size, create from the snapshot→first
//	             output, of an idle sandbox and of one holding 200 MiB of
//	             Python objects (at most 5 samples), against cold
//	             create→first output; a fork of 8 of the 200 MiB sandbox
//	             against 8 resumes of it, all measured alongside
//	code         the code interpreter (code-interpreter template, built
//	             if missing): run_code `x=1` in a warm context against an
//	             exec of python3 -c 'x=1' in the same sandbox; the first
//	             matplotlib chart of a new context; create to the first
//	             run_code result, cold from the template's warm image
//	             against cold without one (the kernel started by the call,
//	             as before warm templates), and from a pool whose kernels
//	             are warm
//
// Everything it creates lives under /tmp/wr-bench-suite, in runsc roots
// there, in cgroups named after its sandboxes, and in network namespaces,
// veths and nftables tables named wrbs*/wbs*. It is all removed at the end,
// on error and on SIGINT/SIGTERM; the names are fixed, so a run killed
// outright is swept by the next (two runs exclude each other with a lock).
//
// Run it as root after scripts/install.sh: bench/run.sh, or
// go run ./bench/suite [-runs N] [-idle K] [-only startup,exec,...].
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"withruntime.dev/runtime/bench/internal/benchenv"
)

var allSections = []string{"startup", "claim", "exec", "concurrency", "burst", "memory", "image", "pause", "snapshot", "code"}

type options struct {
	Runs        int     `json:"runs"`
	Idle        int     `json:"idle"`
	BareIdle    int     `json:"bareIdle"`
	BareExec    bool    `json:"bareExec"`
	PoolSize    int     `json:"poolSize"`
	Burst       int     `json:"burst"`
	BurstPool   int     `json:"burstPool"`
	ConcTotal   int     `json:"concurrencyTotal"`
	Conc        []int   `json:"concurrency"`
	IdleWindowS float64 `json:"idleWindowSec"`
	Network     bool    `json:"network"`
	Floor       bool    `json:"floor"`
	Only        []string
	Out         string `json:"-"`
	Templates   string `json:"templates"`
}

func main() {
	var o options
	var only, conc string
	var idleWindow time.Duration
	flag.IntVar(&o.Runs, "runs", 50, "samples per row (startup and exec)")
	flag.IntVar(&o.Idle, "idle", 200, "idle sandboxes held at once (memory)")
	flag.IntVar(&o.BareIdle, "bare-idle", 20, "idle bare runsc sandboxes held alongside them (memory baseline; capped at -idle)")
	flag.BoolVar(&o.BareExec, "bare-exec", false, "each idle bare runsc sandbox first runs one `runsc exec` of true, as each Runtime sandbox runs one exec (memory baseline)")
	flag.IntVar(&o.PoolSize, "pool-size", 2, "warm pool size of the pooled server (startup)")
	flag.IntVar(&o.Burst, "burst", 64, "creates sent at once (burst)")
	flag.IntVar(&o.BurstPool, "burst-pool", 4, "warm pool size (its floor) of the server that takes the burst")
	flag.IntVar(&o.ConcTotal, "conc-total", 32, "sandboxes per concurrency level")
	flag.StringVar(&conc, "conc", "1,4,16", "concurrency levels")
	flag.DurationVar(&idleWindow, "idle-window", 10*time.Second, "window over which idle CPU is measured (memory)")
	flag.BoolVar(&o.Network, "network", true, "sandbox networks on (the production default); false runs runsc --network=none")
	flag.BoolVar(&o.Floor, "floor", true, "concurrency: also run the floor programs (bench/internal/bare: a Go and a C program running `true` as a child), the least any agent costs")
	flag.StringVar(&only, "only", "", "comma list of sections to run: "+strings.Join(allSections, ","))
	flag.StringVar(&o.Out, "out", "", "where to write the JSON results (default bench/results/suite.json; none with -only)")
	flag.StringVar(&o.Templates, "templates", "/var/lib/withruntime/templates", "templates directory (base must be built)")
	flag.Parse()
	o.IdleWindowS = idleWindow.Seconds()
	if only == "" {
		o.Only = allSections
		if o.Out == "" {
			o.Out = "bench/results/suite.json"
		}
	} else {
		for _, s := range strings.Split(only, ",") {
			s = strings.TrimSpace(s)
			if !slices.Contains(allSections, s) {
				fatal(fmt.Errorf("-only: unknown section %q (sections: %s)", s, strings.Join(allSections, ",")))
			}
			o.Only = append(o.Only, s)
		}
	}
	for _, s := range strings.Split(conc, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil || n < 1 {
			fatal(fmt.Errorf("-conc: bad level %q", s))
		}
		o.Conc = append(o.Conc, n)
	}
	if o.Runs < 1 || o.Idle < 1 || o.PoolSize < 1 || o.ConcTotal < 1 || o.Burst < 1 || o.BurstPool < 1 {
		fatal(errors.New("-runs, -idle, -pool-size, -conc-total, -burst and -burst-pool must be at least 1"))
	}
	o.BareIdle = min(o.BareIdle, o.Idle)

	// A closed stdout (| head) must not kill the run before its cleanup.
	signal.Ignore(syscall.SIGPIPE)
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		first := true
		for s := range sigs {
			if first {
				fmt.Fprintf(os.Stderr, "suite: %v: stopping; deleting every sandbox first\n", s)
				cancel()
				first = false
				continue
			}
			fmt.Fprintf(os.Stderr, "suite: %v: still cleaning up (kill -9 abandons it; the next run sweeps what is left)\n", s)
		}
	}()
	err := run(ctx, o, idleWindow)
	cancel()
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "suite:", err)
	os.Exit(1)
}

// results is what the JSON file holds.
type results struct {
	At       time.Time        `json:"at"`
	Options  options          `json:"options"`
	Host     hostInfo         `json:"host"`
	Rows     []*row           `json:"rows"`
	Checks   []benchenv.Check `json:"checks"`
	Notes    []string         `json:"notes"`
	Sections []string         `json:"sections"`
	// Memory is the memory section's per-sandbox figures.
	Memory *memoryDetail `json:"memory,omitempty"`
}

type hostInfo struct {
	CPUs        int    `json:"cpus"`
	MemTotalMiB int64  `json:"memTotalMiB"`
	Kernel      string `json:"kernel"`
	Runsc       string `json:"runsc"`
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
		return fmt.Errorf("another suite run holds %s: %w", lock.Name(), err)
	}
	defer os.Remove(lock.Name()) // while still holding it

	env, err := newEnv(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		// Cleanup gets its own time, also after SIGINT cancelled ctx.
		if cerr := env.cleanup(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("cleanup: %w", cerr))
		}
	}()
	res := &results{At: time.Now().UTC(), Options: o, Host: env.hostInfo(), Sections: o.Only}
	env.res = res

	var runErr error
	for _, s := range o.Only {
		fmt.Fprintf(os.Stderr, "suite: %s ...\n", s)
		t0 := time.Now()
		switch s {
		case "startup":
			runErr = env.startup(ctx)
		case "exec":
			runErr = env.exec(ctx)
		case "concurrency":
			runErr = env.concurrency(ctx)
		case "burst":
			runErr = env.burst(ctx)
		case "memory":
			runErr = env.memory(ctx, idleWindow)
		case "image":
			runErr = env.imageSection(ctx)
		case "pause":
			runErr = env.pause(ctx)
		case "snapshot":
			runErr = env.snapshotSection(ctx)
		case "code":
			runErr = env.codeSection(ctx)
		case "claim":
			runErr = env.claim(ctx)
		}
		fmt.Fprintf(os.Stderr, "suite: %s done in %s\n", s, time.Since(t0).Round(time.Second))
		if runErr != nil {
			runErr = fmt.Errorf("%s: %w", s, runErr)
			break
		}
	}
	// The cold server lives across sections; close it (deleting anything
	// left, then checking) before the table.
	env.mu.Lock()
	open := slices.Clone(env.servers)
	env.mu.Unlock()
	for _, s := range open {
		if !s.closed {
			if err := env.closeAndCheck(s); err != nil {
				runErr = errors.Join(runErr, err)
			}
		}
	}
	// What was measured is printed even when a section failed.
	printTable(os.Stdout, res)
	if runErr != nil {
		return runErr
	}
	var leaks []string
	for _, c := range res.Checks {
		if len(c.Left) > 0 {
			leaks = append(leaks, c.Name)
		}
	}
	defer func() {
		if len(leaks) > 0 {
			err = errors.Join(err, fmt.Errorf("leak checks failed: %s", strings.Join(leaks, "; ")))
		}
	}()
	if o.Out == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(o.Out, append(data, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "suite: wrote %s\n", o.Out)
	return nil
}
