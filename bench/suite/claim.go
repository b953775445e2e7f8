package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"withruntime.dev/runtime/bench/internal/stats"
	"withruntime.dev/runtime/internal/api"
)

// claim measures the commands that follow a claim from the warm pool: in a
// just-claimed sandbox, the first, second and third streamed exec of the
// python3, one after another, while the pool boots the claimed sandbox's
// replacement (after refillQuiet); interleaved with the same exec in a
// sandbox that has run all along on the same server, the baseline.
func (e *env) claim(ctx context.Context) (err error) {
	pool, err := e.openServer(ctx, poolKind, e.o.PoolSize, nil)
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
	runID, err := pool.c.Create(ctx, api.CreateSandboxRequest{})
	if err != nil {
		return err
	}
	defer func() {
		if derr := pool.c.Del(context.WithoutCancel(ctx), runID); derr != nil && err == nil {
			err = derr
		}
	}()
	if _, err := pool.c.ExecCollected(ctx, runID, pythonArgv, pythonOut); err != nil {
		return err
	}
	var first, second, third, running []time.Duration
	for i := -1; i < e.o.Runs; i++ { // i == -1 warms up, unrecorded
		if _, err := pool.c.WaitPoolFull(ctx, 3*time.Minute); err != nil {
			return err
		}
		id, err := pool.c.Create(ctx, api.CreateSandboxRequest{})
		if err != nil {
			return err
		}
		var ds [4]time.Duration
		for j, sb := range []string{id, runID, id, id} {
			if ds[j], err = pool.c.ExecToFirstOutput(ctx, sb, pythonArgv, pythonOut); err != nil {
				_ = pool.c.Del(context.WithoutCancel(ctx), id)
				return fmt.Errorf("exec %d after a claim: %w", j, err)
			}
		}
		if err := pool.c.Del(context.WithoutCancel(ctx), id); err != nil {
			return err
		}
		if i >= 0 {
			first, running = append(first, ds[0]), append(running, ds[1])
			second, third = append(second, ds[2]), append(third, ds[3])
		}
		if i >= 0 && (i+1)%10 == 0 {
			fmt.Fprintf(os.Stderr, "suite: claim %d/%d\n", i+1, e.o.Runs)
		}
	}
	const sec = "claim"
	rows := []*row{
		e.add(sampleRow(sec, "API exec→first output, first after a claim", "ms", stats.MSSamples(first))),
		e.add(sampleRow(sec, "API exec→first output, second after a claim", "ms", stats.MSSamples(second))),
		e.add(sampleRow(sec, "API exec→first output, third after a claim", "ms", stats.MSSamples(third))),
	}
	base := e.add(sampleRow(sec, "API exec→first output, running sandbox", "ms", stats.MSSamples(running)))
	base.Baseline, base.Short = true, "exec in a running sandbox"
	for i, ds := range [][]time.Duration{first, second, third} {
		compare(rows[i], base)
		rs := make([]float64, len(ds))
		for j := range ds {
			rs[j] = float64(ds[j]) / float64(running[j])
		}
		if len(rs) > 0 {
			rows[i].Note = fmt.Sprintf("median of per-iteration ratios to the running sandbox's: %.2f", *sampleRow("", "", "", rs).Median)
		}
	}
	return nil
}
