package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

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
func (e *env) burst(ctx context.Context) (err error) {
	cold, err := e.cold(ctx)
	if err != nil {
		return err
	}
	const sec = "burst"
	// The cold baseline: one create at a time.
	var coldSamples []time.Duration
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
		if i > 0 { // the first warms up
			coldSamples = append(coldSamples, d)
		}
	}
	base := e.add(sampleRow(sec, "API create (POST answered), cold, one at a time", "ms", stats.MSSamples(coldSamples)))
	base.Baseline, base.Short = true, "cold create"

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
		r.Note = fmt.Sprintf("p99 %.2f× the cold create's median (goal ≤ 2); pool size after the burst %d", *r.P99 / *base.Median, grown)
		e.note("burst: %s", r.Note)
	}
	c, _, err := e.burstOn(ctx, cold, fmt.Sprintf("API create ×%d at once, no pool", e.o.Burst))
	if err != nil {
		return err
	}
	compare(c, base)
	if c.P99 != nil && base.Median != nil {
		c.Note = fmt.Sprintf("p99 %.2f× the cold create's median", *c.P99 / *base.Median)
	}
	fmt.Fprintf(os.Stderr, "suite: burst: pooled p99 %.0f ms, no pool p99 %.0f ms, cold create median %.0f ms\n", *r.P99, *c.P99, *base.Median)
	return nil
}

// burstOn sends e.o.Burst creates at once to s and deletes them all after
// (four at a time, untimed). It fails if any create failed. grown is the
// pool size health reports right after the burst (0 without a pool).
func (e *env) burstOn(ctx context.Context, s *benchServer, name string) (*row, int, error) {
	var (
		mu   sync.Mutex
		ds   []time.Duration
		ids  []string
		errs []error
	)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < e.o.Burst; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t := time.Now()
			id, err := s.c.Create(ctx, api.CreateSandboxRequest{TimeoutSeconds: 600})
			d := time.Since(t)
			mu.Lock()
			defer mu.Unlock()
			if id != "" {
				ids = append(ids, id)
				s.c.Remember(id)
			}
			if err != nil {
				errs = append(errs, err)
				return
			}
			ds = append(ds, d)
		}()
	}
	close(start)
	wg.Wait()
	grown, _, _ := s.c.PoolReady(ctx)
	derr := s.c.DeleteAll(context.WithoutCancel(ctx), ids, 4)
	r := e.add(sampleRow("burst", name, "ms", stats.MSSamples(ds)))
	r.Failures = len(errs)
	if len(errs) > 0 {
		return r, grown, fmt.Errorf("%s: %d of %d creates failed, first: %w", name, len(errs), e.o.Burst, errs[0])
	}
	return r, grown, derr
}
