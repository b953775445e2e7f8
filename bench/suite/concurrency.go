package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/bench/internal/apiclient"
	"withruntime.dev/runtime/bench/internal/bare"
	"withruntime.dev/runtime/bench/internal/benchenv"
	"withruntime.dev/runtime/bench/internal/stats"
	"withruntime.dev/runtime/internal/api"
)

// lifecycle is one worker's sandbox: create, exec true, delete.
type lifecycle struct {
	total, create, exec, del time.Duration
	err                      error
}

// concurrency measures sandboxes per second through the API (each: create,
// collected exec of `true`, delete) with c workers over a fixed number of
// sandboxes, against bare `runsc run` of `true` (boot, run, exit, delete)
// at the same concurrency. Failures are counted, not fatal. Afterwards it
// checks that nothing is left.
func (e *env) concurrency(ctx context.Context) error {
	cold, err := e.cold(ctx)
	if err != nil {
		return err
	}
	const sec = "concurrency"
	floors, err := e.floorRunners()
	if err != nil {
		return err
	}
	for _, c := range e.o.Conc {
		// Runtime.
		var (
			mu   sync.Mutex
			runs []lifecycle
		)
		wall, err := benchenv.FanOut(ctx, c, e.o.ConcTotal, func() {
			l := apiLifecycle(ctx, cold.c)
			mu.Lock()
			runs = append(runs, l)
			mu.Unlock()
		})
		if err != nil {
			return err
		}
		var ok []time.Duration
		var cr, ex, de []time.Duration
		var errs []string
		for _, l := range runs {
			if l.err != nil {
				errs = append(errs, l.err.Error())
				continue
			}
			ok = append(ok, l.total)
			cr, ex, de = append(cr, l.create), append(ex, l.exec), append(de, l.del)
		}
		r := e.add(sampleRow(sec, fmt.Sprintf("API create+exec+delete ×%d, %d at once", e.o.ConcTotal, c), "ms", stats.MSSamples(ok)))
		r.Value, r.ValueUnit = stats.F64(float64(len(ok))/wall.Seconds()), "sandboxes/s"
		r.Failures = len(errs)
		r.Note = fmt.Sprintf("%d at once: median create %.0f ms, exec %.0f ms, delete %.0f ms; %d of %d completed in %.1f s",
			c, stats.MedianMS(cr), stats.MedianMS(ex), stats.MedianMS(de), len(ok), e.o.ConcTotal, wall.Seconds())
		if len(errs) > 0 {
			slices.Sort(errs)
			errs = slices.Compact(errs)
			r.Note += "; failures: " + strings.Join(errs[:min(3, len(errs))], " | ")
		}
		e.note("concurrency: %s", r.Note)

		// Bare runsc.
		var bareRuns []time.Duration
		bareFails := 0
		var bareErrs []string
		bwall, err := benchenv.FanOut(ctx, c, e.o.ConcTotal, func() {
			d, err := e.bare.RunToExit(ctx, []string{"true"})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				bareFails++
				bareErrs = append(bareErrs, err.Error())
				return
			}
			bareRuns = append(bareRuns, d)
		})
		if err != nil {
			return err
		}
		b := e.add(sampleRow(sec, fmt.Sprintf("bare runsc run `true` ×%d, %d at once", e.o.ConcTotal, c), "ms", stats.MSSamples(bareRuns)))
		b.Baseline, b.Short = true, "bare runsc"
		b.Value, b.ValueUnit = stats.F64(float64(len(bareRuns))/bwall.Seconds()), "sandboxes/s"
		b.Failures = bareFails
		if bareFails > 0 {
			e.note("concurrency: bare runsc failures at %d: %s", c, bareErrs[0])
		}
		compareValue(r, b)
		if r.Value != nil && b.Value != nil && *r.Value > 0 {
			b.Vs = fmt.Sprintf("Runtime's rate %s× this", stats.Short(*r.Value / *b.Value))
		}
		fmt.Fprintf(os.Stderr, "suite: concurrency %d: %.2f/s (bare %.2f/s)\n", c, *r.Value, *b.Value)

		// The floors: a bare sandbox whose first process runs `true` as a
		// child, the least an agent does for a command.
		for _, f := range floors {
			var runs []time.Duration
			fails := 0
			fwall, err := benchenv.FanOut(ctx, c, e.o.ConcTotal, func() {
				d, err := f.runner.RunToExit(ctx, []string{bare.FloorPath, "exec"})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if fails == 0 {
						e.note("concurrency: %s floor failed at %d: %v", f.lang, c, err)
					}
					fails++
					return
				}
				runs = append(runs, d)
			})
			if err != nil {
				return err
			}
			fr := e.add(sampleRow(sec, fmt.Sprintf("bare runsc run of a %s program running `true` as a child ×%d, %d at once", f.lang, e.o.ConcTotal, c), "ms", stats.MSSamples(runs)))
			fr.Value, fr.ValueUnit = stats.F64(float64(len(runs))/fwall.Seconds()), "sandboxes/s"
			fr.Failures = fails
			compareValue(fr, b)
			if r.Value != nil && fr.Value != nil && *fr.Value > 0 {
				fr.Vs += fmt.Sprintf("; Runtime's rate %s× this", stats.Short(*r.Value / *fr.Value))
			}
			fmt.Fprintf(os.Stderr, "suite: concurrency %d: %s floor %.2f/s\n", c, f.lang, *fr.Value)
		}
	}
	// Nothing may be left: no runsc container, sandbox directory, cgroup,
	// namespace or veth of any sandbox the server had.
	chk := e.leakCheck(cold, "after the concurrency section")
	if left := e.bare.List(); len(left) > 0 {
		chk.Left = append(chk.Left, "bare runsc containers "+strings.Join(left, " "))
	}
	for _, d := range e.bare.Cgroups() {
		chk.Left = append(chk.Left, "bare cgroup "+d)
	}
	e.res.Checks = append(e.res.Checks, chk)
	return nil
}

// floor is a bare runner whose sandboxes hold a floor program.
type floor struct {
	lang   string
	runner *bare.Runner
}

// floorRunners builds the floor programs (bench/internal/bare) and returns
// a bare runner for each, or none without -floor. The C one needs gcc and a
// static libc; without them it is left out and a note says why.
func (e *env) floorRunners() ([]floor, error) {
	if !e.o.Floor {
		return nil, nil
	}
	dir := filepath.Join(e.bare.Dir, "floor")
	var out []floor
	gobin, err := bare.BuildGoFloor(dir)
	if err != nil {
		return nil, err
	}
	r := *e.bare
	r.Files = map[string]string{bare.FloorPath: gobin}
	out = append(out, floor{"Go", &r})
	if cbin, err := bare.BuildCFloor(dir); err != nil {
		e.note("concurrency: no C floor: %v", err)
	} else {
		r := *e.bare
		r.Files = map[string]string{bare.FloorPath: cbin}
		out = append(out, floor{"C", &r})
	}
	return out, nil
}

// apiLifecycle creates a sandbox, runs `true` in it and deletes it. A
// sandbox whose exec failed is still deleted.
func apiLifecycle(ctx context.Context, c *apiclient.Client) (l lifecycle) {
	start := time.Now()
	id, err := c.Create(ctx, api.CreateSandboxRequest{TimeoutSeconds: 600})
	l.create = time.Since(start)
	if err != nil {
		if id != "" {
			_ = c.Del(context.WithoutCancel(ctx), id)
		}
		l.err = fmt.Errorf("create: %w", err)
		return l
	}
	t := time.Now()
	_, err = c.ExecCollected(ctx, id, []string{"true"}, "")
	l.exec = time.Since(t)
	t = time.Now()
	derr := c.Del(context.WithoutCancel(ctx), id)
	l.del = time.Since(t)
	l.total = time.Since(start)
	switch {
	case err != nil:
		l.err = fmt.Errorf("exec: %w", err)
	case derr != nil:
		l.err = fmt.Errorf("delete: %w", derr)
	}
	return l
}
