package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/bench/internal/benchenv"
	"withruntime.dev/runtime/bench/internal/stats"
)

// bareScale is the host's share of the exec slowdown: the same exec
// measure as the server's, on bare runsc sandboxes (bench/internal/bare:
// the equal bundle, `sleep infinity`, no agent, no server, no network).
// `runsc exec true` into the only bare sandbox on the host (the
// baseline), then, with -bare-n held idle (filled -fill-conc at once), into
// -execs of them drawn at random, twice each as the server's phase does.
// It runs before the server starts and destroys every bare sandbox before
// returning (so the two sets are never held at once), then checks that
// none is left.
func (e *env) bareScale(ctx context.Context) (err error) {
	o, b := e.o, e.bare
	var (
		mu  sync.Mutex
		ids []string
	)
	defer func() {
		mu.Lock()
		held := slices.Clone(ids)
		mu.Unlock()
		t := time.Now()
		derr := b.DestroyAll(held, 8)
		e.note("bare runsc: destroyed %d sandboxes in %.1f s (8 at once)", len(held), time.Since(t).Seconds())
		chk := benchenv.Check{Name: "bare runsc, after destroying every bare sandbox", Left: []string{}}
		for _, id := range b.List() {
			chk.Left = append(chk.Left, "bare runsc container "+id)
		}
		for _, d := range b.Cgroups() {
			chk.Left = append(chk.Left, "bare cgroup "+d)
		}
		self := os.Getpid()
		for pid, cmd := range benchenv.ProcIndex() {
			if pid != self && strings.Contains(cmd, b.Dir+"/") {
				chk.Left = append(chk.Left, fmt.Sprintf("process %d (%.60s)", pid, cmd))
			}
		}
		e.res.Checks = append(e.res.Checks, chk)
		if len(chk.Left) > 0 {
			derr = errors.Join(derr, fmt.Errorf("%s: left %s", chk.Name, strings.Join(chk.Left, ", ")))
		}
		err = errors.Join(err, derr)
	}()
	const sec = "bare exec"

	fmt.Fprintf(os.Stderr, "scale: bare runsc: exec into one bare sandbox (%d samples)\n", o.Execs)
	first, err := b.Start(ctx, "idle")
	if err != nil {
		return fmt.Errorf("bare runsc start: %w", err)
	}
	ids = append(ids, first)
	if err := e.waitQuiet(ctx, "the one-bare-sandbox baseline"); err != nil {
		return err
	}
	var one []time.Duration
	for i := 0; i < o.Execs+3; i++ {
		d, err := b.Exec(ctx, first, []string{"true"}, "")
		if err != nil {
			return err
		}
		if i >= 3 { // three unrecorded rounds first
			one = append(one, d)
		}
	}
	oneRow := e.add(sampleRow(sec, "bare runsc exec true, one bare sandbox on the host", "ms", stats.MSSamples(one)))
	oneRow.Short = "one bare sandbox"

	fmt.Fprintf(os.Stderr, "scale: bare runsc: starting %d bare sandboxes, %d at once\n", o.BareN-1, o.FillConc)
	var (
		starts   []time.Duration
		failures []string
	)
	wall, err := benchenv.FanOut(ctx, o.FillConc, o.BareN-1, func() {
		t := time.Now()
		id, err := b.Start(ctx, "idle")
		d := time.Since(t)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failures = append(failures, err.Error())
			return
		}
		ids = append(ids, id)
		starts = append(starts, d)
		if n := len(starts) + 1; n%100 == 0 {
			fmt.Fprintf(os.Stderr, "scale: bare runsc: %d/%d held (MemAvailable %.1f GiB)\n", n, o.BareN, benchenv.GiB(benchenv.Meminfo("MemAvailable")))
		}
	})
	rf := e.add(sampleRow(sec, fmt.Sprintf("bare runsc run --detach while filling to %d, %d at once", o.BareN, o.FillConc), "ms", stats.MSSamples(starts)))
	rf.Failures = len(failures)
	if wall > 0 {
		rf.Value, rf.ValueUnit = stats.F64(float64(len(starts))/wall.Seconds()), "sandboxes/s"
		rf.Vs = fmt.Sprintf("%d started in %.0f s", len(starts), wall.Seconds())
	}
	if err != nil {
		return err
	}
	if len(failures) > 0 {
		return fmt.Errorf("bare runsc: %d of %d starts failed, e.g. %s", len(failures), o.BareN-1, failures[0])
	}
	if err := benchenv.SleepCtx(ctx, 5*time.Second); err != nil { // boot work settles
		return err
	}

	fmt.Fprintf(os.Stderr, "scale: bare runsc: exec into %d random bare sandboxes of %d\n", o.Execs, o.BareN)
	var among, again []time.Duration
	for _, id := range pick(ids, o.Execs) {
		d, err := b.Exec(ctx, id, []string{"true"}, "")
		if err != nil {
			return err
		}
		d2, err := b.Exec(ctx, id, []string{"true"}, "")
		if err != nil {
			return err
		}
		among, again = append(among, d), append(again, d2)
	}
	ra := e.add(sampleRow(sec, fmt.Sprintf("bare runsc exec true, a random one of %d idle (first exec after idling)", o.BareN), "ms", stats.MSSamples(among)))
	compare(ra, oneRow)
	rb := e.add(sampleRow(sec, fmt.Sprintf("bare runsc exec true, a random one of %d idle (second exec, right after)", o.BareN), "ms", stats.MSSamples(again)))
	compare(rb, oneRow)
	e.bareExec = []*row{oneRow, ra, rb}
	return nil
}

// noteHostShare notes, for the first and the second exec among the idle,
// Runtime's slowdown (÷ its one-sandbox p50), bare runsc's (÷ its own), and
// Runtime's ÷ bare's: the part of the slowdown that is Runtime's own.
func (e *env) noteHostShare(first, second *row) {
	if len(e.bareExec) != 3 {
		return
	}
	for i, r := range []*row{first, second} {
		b := e.bareExec[i+1]
		if r.Ratio == nil || b.Ratio == nil || *b.Ratio == 0 {
			continue
		}
		which := "first exec after idling"
		if i == 1 {
			which = "second exec, right after"
		}
		e.note("exec among the idle ÷ with one, p50 (%s): Runtime %s× among %d, bare runsc %s× among %d; Runtime's ÷ bare's %s",
			which, stats.Short(*r.Ratio), e.o.N, stats.Short(*b.Ratio), e.o.BareN, stats.Short(*r.Ratio / *b.Ratio))
	}
}
