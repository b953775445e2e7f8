// Command workloads measures real developer work — tar, find, grep, git,
// venv and pip install, pytest, npm ci, tsc, eslint, go build and vet —
// inside a Runtime sandbox, inside a bare runsc sandbox with runsc's
// default flags on the same root filesystem, and on the host without
// gVisor, interleaved, and prints medians, p90s and ratios (bench/README.md,
// "workloads"). Run as root: go run ./bench/workloads [-runs N] [-only files,git,...]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"withruntime.dev/runtime/bench/internal/bare"
	"withruntime.dev/runtime/bench/internal/benchenv"
	"withruntime.dev/runtime/internal/server"
)

const (
	workDir          = "/tmp/wr-bench-workloads"
	bareCgroupParent = "withruntime-bench-workloads"
	defaultCache     = "/var/cache/withruntime/bench-workloads"
)

type options struct {
	runs       int
	only       []string
	envs       []string
	out        string
	cache      string
	diskMedium string
	warmup     int
}

func main() {
	var o options
	var only, envs string
	flag.IntVar(&o.runs, "runs", 5, "interleaved iterations (each runs every task on every path)")
	flag.IntVar(&o.warmup, "warmup", 0, "unrecorded iterations first")
	flag.StringVar(&only, "only", "", "comma-separated groups to run (files,root,git,python,node,go; default all)")
	flag.StringVar(&envs, "envs", "runtime,bare,host", "comma-separated paths: runtime, bare (runsc defaults), bare-rt (bare runsc with Runtime's flags), bare-erofs (bare-rt booting the template's EROFS image), bare-erofs-def (bare booting it), host")
	flag.StringVar(&o.out, "out", "", "where to write the samples (default bench/results/workloads.json; with -only, nothing unless given)")
	flag.StringVar(&o.cache, "cache", defaultCache, "where the template and the inputs are kept between runs")
	flag.StringVar(&o.diskMedium, "disk-medium", "", "the Runtime server's disk medium (file or memory; default the server's)")
	flag.Parse()
	if only != "" {
		o.only = strings.Split(only, ",")
		for _, g := range o.only {
			if !slices.ContainsFunc(groups, func(x group) bool { return x.name == g }) {
				fmt.Fprintf(os.Stderr, "workloads: -only: no group %q\n", g)
				os.Exit(2)
			}
		}
	}
	o.envs = strings.Split(envs, ",")
	for _, e := range o.envs {
		if !slices.Contains(bareEnvs, e) && e != "runtime" && e != "host" {
			fmt.Fprintf(os.Stderr, "workloads: -envs: no path %q\n", e)
			os.Exit(2)
		}
	}
	if o.out == "" && only == "" {
		o.out = "bench/results/workloads.json"
	}
	if o.runs < 1 {
		fmt.Fprintln(os.Stderr, "workloads: -runs must be at least 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "workloads:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("run as root (gVisor, the template build and bubblewrap need it)")
	}
	if _, err := os.Stat("sdk/typescript/package-lock.json"); err != nil {
		return errors.New("run from the repository's root (the SDKs' sources are inputs): cd to the checkout, then go run ./bench/workloads")
	}
	runsc, err := benchenv.FindRunsc()
	if err != nil {
		return err
	}
	if err := sweep(runsc); err != nil {
		return fmt.Errorf("sweeping an earlier run's leftovers: %w", err)
	}
	defer func() {
		if serr := sweep(runsc); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	if err := os.MkdirAll(filepath.Join(workDir, "inputs"), 0o755); err != nil {
		return err
	}
	_, rootfs, err := ensureTemplate(ctx, o.cache)
	if err != nil {
		return err
	}
	var image string
	if slices.Contains(o.envs, "bare-erofs") || slices.Contains(o.envs, "bare-erofs-def") {
		if image, err = ensureErofs(ctx, rootfs); err != nil {
			return err
		}
	}
	sel := selected(o.only)
	var names []string
	for _, g := range sel {
		for _, n := range g.inputs {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	files, err := prepareInputs(ctx, o.cache, filepath.Join(workDir, "inputs"), names)
	if err != nil {
		return err
	}
	if err := writeManifest(o.cache); err != nil {
		return err
	}

	runners, stopServer, err := openRunners(ctx, o, runsc, rootfs, image)
	if err != nil {
		return err
	}
	defer func() {
		if serr := stopServer(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()

	res := newResults(o, runsc, rootfs)
	// A failed step ends the run; the iterations done before it are still
	// summarised and written (Runs says how many), then the error returned.
	var runErr error
	for it := -o.warmup; it < o.runs && runErr == nil; it++ {
		load := loadAvg()
		fmt.Fprintf(os.Stderr, "iteration %d/%d (load %s)\n", it+1, o.runs, load)
		type done struct {
			g     group
			path  string
			times []time.Duration
		}
		var iter []done
		for _, g := range sel {
			// Rotate the paths' order each iteration, so that none always
			// runs first (cold host caches) or right after another.
			order := slices.Clone(runners)
			for k := 0; k < (it+o.warmup)%len(order); k++ {
				order = append(order[1:], order[0])
			}
			for _, r := range order {
				times, err := runGroup(ctx, r, g, files)
				if err != nil {
					runErr = fmt.Errorf("iteration %d, %s, %s: %w", it+1, g.name, r.name(), err)
					break
				}
				iter = append(iter, done{g, r.name(), times})
			}
			if runErr != nil {
				break
			}
		}
		if it >= 0 && runErr == nil {
			res.Loads = append(res.Loads, load)
			for _, d := range iter {
				res.add(d.g, d.path, d.times)
			}
			res.Runs = it + 1
		}
	}
	if res.Runs == 0 {
		return runErr
	}
	res.Loads = append(res.Loads, loadAvg())
	res.finish()
	res.print(os.Stdout)
	if o.out != "" {
		if err := res.write(o.out); err != nil {
			return errors.Join(runErr, err)
		}
		fmt.Fprintf(os.Stderr, "samples written to %s\n", o.out)
	}
	return runErr
}

func selected(only []string) []group {
	if len(only) == 0 {
		return groups
	}
	var out []group
	for _, g := range groups {
		if slices.Contains(only, g.name) {
			out = append(out, g)
		}
	}
	return out
}

// runGroup opens a fresh box, uploads the group's inputs, runs its prep and
// then its steps, timed, and closes the box.
func runGroup(ctx context.Context, r runner, g group, files map[string]string) (times []time.Duration, err error) {
	b, err := r.open(ctx)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	defer func() {
		if cerr := b.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close: %w", cerr))
		}
	}()
	for _, n := range g.inputs {
		if err := b.upload(ctx, files[n]); err != nil {
			return nil, fmt.Errorf("upload %s: %w", n, err)
		}
	}
	if g.prep != "" {
		if _, _, err := b.run(ctx, g.prep); err != nil {
			return nil, fmt.Errorf("prep: %w", err)
		}
	}
	for _, s := range g.steps {
		d, out, err := b.run(ctx, s.script)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		if !s.want.MatchString(out) {
			return nil, fmt.Errorf("%s: printed %q, want %s", s.name, tailStr(out, 500), s.want)
		}
		fmt.Fprintf(os.Stderr, "  %-8s %-45s %8.2fs  %s\n", r.name(), s.name, d.Seconds(), strings.TrimSpace(tailStr(out, 40)))
		times = append(times, d)
	}
	return times, nil
}

// openRunners starts what the paths need: an in-process server for
// Runtime (no pool, no sandbox networks: these tasks are offline; metering
// on), the bare runners, the host directory.
func openRunners(ctx context.Context, o options, runsc, rootfs, image string) ([]runner, func() error, error) {
	var runners []runner
	stopServer := func() error { return nil }
	for _, e := range o.envs {
		switch e {
		case "runtime":
			agent, err := benchenv.BuildAgent(ctx, workDir)
			if err != nil {
				return nil, stopServer, err
			}
			cfg := server.Config{DataDir: filepath.Join(workDir, "runtime"), TemplatesDir: filepath.Join(o.cache, "templates"),
				Runsc: runsc, Agent: agent, DiskMedium: o.diskMedium, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			cfg.Egress.Disabled = true
			served, err := benchenv.Serve(ctx, cfg, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}, nil)
			if err != nil {
				return nil, stopServer, err
			}
			stopServer = served.Stop
			runners = append(runners, &runtimeRunner{c: served.C, tpl: templateName})
		case "bare", "bare-rt", "bare-erofs", "bare-erofs-def":
			size := &bare.Size{CPUs: sandboxCPUs, MemoryBytes: sandboxMemoryMiB << 20, DiskBytes: sandboxDiskMiB << 20}
			b := &bare.Runner{Runsc: runsc, Rootfs: rootfs, Dir: filepath.Join(workDir, e), CgroupParent: bareCgroupParent,
				Defaults: e == "bare" || e == "bare-erofs-def", Size: size, Env: taskEnv}
			if strings.HasPrefix(e, "bare-erofs") {
				b.Erofs = image
			}
			if err := os.MkdirAll(b.Dir, 0o700); err != nil {
				return nil, stopServer, err
			}
			runners = append(runners, &bareRunner{b: b, label: e})
		case "host":
			dir := filepath.Join(workDir, "host")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, stopServer, err
			}
			runners = append(runners, &hostRunner{rootfs: rootfs, dir: dir})
		}
	}
	return runners, stopServer, nil
}

// sweep removes what a run leaves: the server's sandboxes, bare runsc
// sandboxes and their cgroups, the work directory.
func sweep(runsc string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errList []error
	if _, err := os.Stat(filepath.Join(workDir, "runtime")); err == nil {
		if err := benchenv.SweepServer(ctx, runsc, filepath.Join(workDir, "runtime"), "wrbwl", "wbwl"); err != nil {
			errList = append(errList, err)
		}
	}
	for _, e := range bareEnvs {
		b := &bare.Runner{Runsc: runsc, Dir: filepath.Join(workDir, e), CgroupParent: bareCgroupParent}
		if err := b.Sweep(); err != nil {
			errList = append(errList, err)
		}
	}
	if err := os.RemoveAll(workDir); err != nil {
		errList = append(errList, err)
	}
	return errors.Join(errList...)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
