package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"withruntime.dev/runtime/bench/internal/apiclient"
	"withruntime.dev/runtime/bench/internal/stats"
	"withruntime.dev/runtime/internal/api"
)

// exec measures the collected exec round trip (POST .../exec, JSON answer)
// of `true` and of the python3 on an already-running sandbox, against
// `runsc exec` of the same into a running bare runsc sandbox.
func (e *env) exec(ctx context.Context) (err error) {
	cold, err := e.cold(ctx)
	if err != nil {
		return err
	}
	id, err := cold.c.Create(ctx, api.CreateSandboxRequest{TimeoutSeconds: 3600})
	if id != "" {
		defer func() {
			if derr := cold.c.Del(context.WithoutCancel(ctx), id); derr != nil && err == nil {
				err = derr
			}
		}()
	}
	if err != nil {
		return err
	}
	bid, err := e.bare.Start(ctx, "exec")
	if err != nil {
		return err
	}
	defer func() {
		if derr := e.bare.Destroy(bid); derr != nil && err == nil {
			err = derr
		}
	}()
	trueArgv := []string{"true"}
	var apiTrue, apiPy, bareTrue, barePy, apiFirst, bareFirst, apiSecond, bareSecond []time.Duration
	for i := -3; i < e.o.Runs; i++ { // three unrecorded rounds warm up
		d1, err := cold.c.ExecCollected(ctx, id, trueArgv, "")
		if err != nil {
			return err
		}
		d2, err := cold.c.ExecCollected(ctx, id, pythonArgv, pythonOut)
		if err != nil {
			return err
		}
		d3, err := e.bare.Exec(ctx, bid, trueArgv, "")
		if err != nil {
			return err
		}
		d4, err := e.bare.Exec(ctx, bid, pythonArgv, pythonOut)
		if err != nil {
			return err
		}
		// The first exec in a sandbox that has just booted (created
		// outside the timing), as a claim from the pool gets.
		d5, d5b, err := e.firstAPIExec(ctx, cold.c)
		if err != nil {
			return err
		}
		d6, d6b, err := e.firstBareExec(ctx)
		if err != nil {
			return err
		}
		if i >= 0 {
			apiTrue = append(apiTrue, d1)
			apiPy = append(apiPy, d2)
			bareTrue = append(bareTrue, d3)
			barePy = append(barePy, d4)
			apiFirst = append(apiFirst, d5)
			bareFirst = append(bareFirst, d6)
			apiSecond = append(apiSecond, d5b)
			bareSecond = append(bareSecond, d6b)
		}
		if i >= 0 && (i+1)%10 == 0 {
			fmt.Fprintf(os.Stderr, "suite: exec %d/%d\n", i+1, e.o.Runs)
		}
	}
	const sec = "exec"
	rTrue := e.add(sampleRow(sec, "API exec `true`, running sandbox", "ms", stats.MSSamples(apiTrue)))
	rPy := e.add(sampleRow(sec, "API exec python3, running sandbox", "ms", stats.MSSamples(apiPy)))
	rFirst := e.add(sampleRow(sec, "API exec python3, first in a new sandbox", "ms", stats.MSSamples(apiFirst)))
	rSecond := e.add(sampleRow(sec, "API exec python3, second in a new sandbox", "ms", stats.MSSamples(apiSecond)))
	bTrue := e.add(sampleRow(sec, "bare runsc exec `true`", "ms", stats.MSSamples(bareTrue)))
	bPy := e.add(sampleRow(sec, "bare runsc exec python3", "ms", stats.MSSamples(barePy)))
	bFirst := e.add(sampleRow(sec, "bare runsc exec python3, first in a new sandbox", "ms", stats.MSSamples(bareFirst)))
	bSecond := e.add(sampleRow(sec, "bare runsc exec python3, second in a new sandbox", "ms", stats.MSSamples(bareSecond)))
	for _, b := range []*row{bTrue, bPy, bFirst, bSecond} {
		b.Baseline, b.Short = true, "bare runsc exec"
	}
	compare(rTrue, bTrue)
	compare(rPy, bPy)
	compare(rFirst, bFirst)
	compare(rSecond, bSecond)
	againstRuntime(bTrue, map[string]*row{"": rTrue}, "")
	againstRuntime(bPy, map[string]*row{"": rPy}, "")
	againstRuntime(bFirst, map[string]*row{"": rFirst}, "")
	againstRuntime(bSecond, map[string]*row{"": rSecond}, "")
	// The target: pooled create-to-first-output at most 1.5 times
	// the exec of the same python3 on a running sandbox.
	for _, r := range e.res.Rows {
		if r.Section == "startup" && r.Name == "API create→first output, pooled" && r.Median != nil && rPy.Median != nil {
			v := *r.Median / *rPy.Median
			t := e.add(&row{Section: sec, Name: "pooled create→first output ÷ API exec python3", Unit: "",
				Value: stats.F64(v), ValueUnit: "×"})
			if v <= 1.5 {
				t.Vs = "target ≤ 1.5: met"
			} else {
				t.Vs = "target ≤ 1.5: NOT met"
			}
		}
		if r.Section == "startup" && r.Name == "API create+exec→first output, pooled" && r.Median != nil && rPy.Median != nil {
			v := *r.Median / *rPy.Median
			t := e.add(&row{Section: sec, Name: "pooled create+exec→first output ÷ API exec python3", Unit: "",
				Value: stats.F64(v), ValueUnit: "×"})
			if v <= 1.15 {
				t.Vs = "target ≤ 1.15: met"
			} else {
				t.Vs = "target ≤ 1.15: NOT met"
			}
		}
	}
	return nil
}

// firstAPIExec creates a sandbox, then times its first and second
// collected execs of the python3, then deletes it.
func (e *env) firstAPIExec(ctx context.Context, c *apiclient.Client) (first, second time.Duration, err error) {
	id, err := c.Create(ctx, api.CreateSandboxRequest{})
	if id != "" {
		defer func() {
			if derr := c.Del(context.WithoutCancel(ctx), id); derr != nil && err == nil {
				err = derr
			}
		}()
	}
	if err != nil {
		return 0, 0, err
	}
	if first, err = c.ExecCollected(ctx, id, pythonArgv, pythonOut); err != nil {
		return 0, 0, err
	}
	second, err = c.ExecCollected(ctx, id, pythonArgv, pythonOut)
	return first, second, err
}

// firstBareExec boots a bare runsc sandbox, then times its first and
// second `runsc exec` of the python3, then destroys it.
func (e *env) firstBareExec(ctx context.Context) (first, second time.Duration, err error) {
	id, err := e.bare.Start(ctx, "first")
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if derr := e.bare.Destroy(id); derr != nil && err == nil {
			err = derr
		}
	}()
	if first, err = e.bare.Exec(ctx, id, pythonArgv, pythonOut); err != nil {
		return 0, 0, err
	}
	second, err = e.bare.Exec(ctx, id, pythonArgv, pythonOut)
	return first, second, err
}
