package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"withruntime.dev/runtime/bench/internal/benchenv"
	"withruntime.dev/runtime/bench/internal/stats"
	"withruntime.dev/runtime/internal/api"
)

// burstKind is the server whose warm pool takes the burst.
var burstKind = serverKind{"burst", "wrbsb", "wbsb"}

// burst measures a burst of -burst concurrent creates (POST answered) on a
// server whose warm pool holds -burst-pool ready sandboxes (and grows with
// demand up to its default maximum), against a cold create's median (one
// create at a time on the server without a pool, in the same run), and
// the same burst on the server without a pool. Every create must succeed;
// all are deleted outside the timing.
//
// The host's own limit comes with it: a bare runsc sandbox's start (`runsc
// run --detach` of the equal bundle, `sleep infinity`, until runsc returns
// with the sandbox running) one at a time, interleaved with the cold
// creates, and -burst of them at once. If bare runsc's burst p99 is far
// over 2× its own one-at-a-time median, no server on gVisor can meet the
// issue's goal on this host: its cores, not Runtime, set the burst's tail.
func (e *env) burst(ctx context.Context) (err error) {
	cold, err := e.cold(ctx)
	if err != nil {
		return err
	}
	const sec = "burst"
	// The cold baselines: one create at a time, each followed by one bare
	// runsc start.
	var coldSamples, bareSamples []time.Duration
	for i := 0; i < min(e.o.Runs, 10)+1; i++ {
		t := time.Now()
		id, err := cold.c.Create(ctx, api.CreateSandboxRequest{TimeoutSeconds: 600})
		d := time.Since(t)
		if err != nil {
			return fmt.Errorf("cold create: %w", err)
		}
		cold.c.Remember(id)
		if err := cold.c.Del(ctx, id); err != nil {
			return err
		}
		t = time.Now()
		bid, err := e.bare.Start(ctx, "cold")
		bd := time.Since(t)
		if err != nil {
			return fmt.Errorf("bare runsc start: %w", err)
		}
		if err := e.bare.Destroy(bid); err != nil {
			return err
		}
		if i > 0 { // the first warms up
			coldSamples = append(coldSamples, d)
			bareSamples = append(bareSamples, bd)
		}
	}
	base := e.add(sampleRow(sec, "API create (POST answered), cold, one at a time", "ms", stats.MSSamples(coldSamples)))
	base.Baseline, base.Short = true, "cold create"
	bareBase := e.add(sampleRow(sec, "bare runsc run --detach, one at a time", "ms", stats.MSSamples(bareSamples)))
	bareBase.Baseline, bareBase.Short = true, "bare runsc start"
	compare(base, bareBase)

	// The host's limit: the same burst of bare runsc starts, before the
	// pooled server exists (its refills would compete).
	bb, err := e.bareBurst(ctx, fmt.Sprintf("bare runsc run --detach ×%d at once", e.o.Burst))
	if err != nil {
		return err
	}
	bb.Baseline, bb.Short = true, "bare runsc burst"
	compare(bb, bareBase)
	bareP99 := 0.0
	if bb.P99 != nil && bareBase.Median != nil {
		bareP99 = *bb.P99
		bb.Note = fmt.Sprintf("bare runsc's p99 %.2f× its one-at-a-time median: the host's own burst tail, to read Runtime's goal (≤ 2) against", *bb.P99 / *bareBase.Median)
		e.note("burst: %s", bb.Note)
	}

	pool, err := e.openServer(ctx, burstKind, e.o.BurstPool, nil)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := e.closeAndCheck(pool); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if _, err := pool.c.WaitPoolFull(ctx, 3*time.Minute); err != nil {
		return err
	}
	r, grown, err := e.burstOn(ctx, pool, fmt.Sprintf("API create ×%d at once, warm pool of %d", e.o.Burst, e.o.BurstPool))
	if err != nil {
		return err
	}
	compare(r, base)
	if r.P99 != nil && base.Median != nil {
		r.Note = fmt.Sprintf("p99 %.2f× the cold create's median (goal ≤ 2)%s; pool size after the burst %d", *r.P99 / *base.Median, vsBareBurst(r, bareP99), grown)
		e.note("burst: %s", r.Note)
	}
	c, _, err := e.burstOn(ctx, cold, fmt.Sprintf("API create ×%d at once, no pool", e.o.Burst))
	if err != nil {
		return err
	}
	compare(c, base)
	if c.P99 != nil && base.Median != nil {
		c.Note = fmt.Sprintf("p99 %.2f× the cold create's median%s", *c.P99 / *base.Median, vsBareBurst(c, bareP99))
	}
	fmt.Fprintf(os.Stderr, "suite: burst: pooled p99 %.0f ms, no pool p99 %.0f ms, cold create median %.0f ms; bare runsc burst p99 %.0f ms, one at a time %.0f ms\n",
		*r.P99, *c.P99, *base.Median, bareP99, *bareBase.Median)
	return nil
}

// burstOn sends e.o.Burst creates at once to s and deletes them all after
// (four at a time, untimed). It fails if any create failed. grown is the
// pool size health reports right after the burst (0 without a pool).
func (e *env) burstOn(ctx context.Context, s *benchServer, name string) (*row, int, error) {
	ds, ids, errs := fireAtOnce(e.o.Burst, func() (string, error) {
		id, err := s.c.Create(ctx, api.CreateSandboxRequest{TimeoutSeconds: 600})
		if id != "" {
			s.c.Remember(id)
		}
		return id, err
	})
	grown, _, _ := s.c.PoolReady(ctx)
	derr := s.c.DeleteAll(context.WithoutCancel(ctx), ids, 4)
	r := e.add(sampleRow("burst", name, "ms", stats.MSSamples(ds)))
	r.Failures = len(errs)
	if len(errs) > 0 {
		return r, grown, fmt.Errorf("%s: %d of %d creates failed, first: %w", name, len(errs), e.o.Burst, errs[0])
	}
	return r, grown, derr
}

// vsBareBurst is ", p99 X× the bare runsc burst's p99" for a Runtime burst
// row, or "" without a bare p99.
func vsBareBurst(r *row, bareP99 float64) string {
	if r.P99 == nil || bareP99 <= 0 {
		return ""
	}
	return fmt.Sprintf(", %.2f× the bare runsc burst's p99", *r.P99/bareP99)
}

// bareBurst starts e.o.Burst bare runsc sandboxes at once (`runsc run
// --detach` of `sleep infinity`), each timed until runsc returns, then
// destroys them all (four at a time, untimed) and checks that none is
// left. It fails if any start failed.
func (e *env) bareBurst(ctx context.Context, name string) (*row, error) {
	ds, ids, errs := fireAtOnce(e.o.Burst, func() (string, error) { return e.bare.Start(ctx, "burst") })
	derr := e.bare.DestroyAll(ids, 4)
	r := e.add(sampleRow("burst", name, "ms", stats.MSSamples(ds)))
	r.Failures = len(errs)
	if len(errs) > 0 {
		return r, errors.Join(fmt.Errorf("%s: %d of %d starts failed, first: %w", name, len(errs), e.o.Burst, errs[0]), derr)
	}
	if derr != nil {
		return r, derr
	}
	chk := benchenv.Check{Name: "bare runsc, after the burst", Left: []string{}}
	for _, id := range e.bare.List() {
		chk.Left = append(chk.Left, "bare runsc container "+id)
	}
	for _, d := range e.bare.Cgroups() {
		chk.Left = append(chk.Left, "bare cgroup "+d)
	}
	e.res.Checks = append(e.res.Checks, chk)
	return r, nil
}

// fireAtOnce runs start n times at once (released together) and returns
// the time each successful start took, every id started (failed ones with
// an id included, so they are cleaned up) and the errors.
func fireAtOnce(n int, start func() (string, error)) (ds []time.Duration, ids []string, errs []error) {
	var mu sync.Mutex
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			t := time.Now()
			id, err := start()
			d := time.Since(t)
			mu.Lock()
			defer mu.Unlock()
			if id != "" {
				ids = append(ids, id)
			}
			if err != nil {
				errs = append(errs, err)
				return
			}
			ds = append(ds, d)
		}()
	}
	close(release)
	wg.Wait()
	return ds, ids, errs
}
