package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"withruntime.dev/runtime/bench/internal/stats"
	"withruntime.dev/runtime/internal/api"
)

// python is the command the startup and exec rows run, and what it prints.
var (
	pythonArgv = []string{"python3", "-c", "print(6*7)"}
	pythonOut  = "42\n"
)

// cold returns the server without a pool (opened on first use; closed at
// the end of the run).
func (e *env) cold(ctx context.Context) (*benchServer, error) {
	e.mu.Lock()
	for _, s := range e.servers {
		if s.kind == coldKind && !s.closed {
			e.mu.Unlock()
			return s, nil
		}
	}
	e.mu.Unlock()
	return e.openServer(ctx, coldKind, 0, nil)
}

// closeAndCheck closes s and records its leak check.
func (e *env) closeAndCheck(s *benchServer) error {
	chk, err := e.closeServer(s)
	if chk.Name != "" {
		e.res.Checks = append(e.res.Checks, chk)
	}
	return err
}

// hostPython is the host's python3 of the same Debian build as the
// template's (/usr/bin/python3), else the first on PATH.
func hostPython() (string, error) {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3", nil
	}
	return exec.LookPath("python3")
}

// startup measures create-to-first-output through the API on a server
// without a pool (cold) and on one with a warm pool (pooled: the pool is
// full before every sample, so each is a real claim), the pool's refill
// after each claim, and the baselines, interleaved so that drift hits all
// alike.
func (e *env) startup(ctx context.Context) (err error) {
	cold, err := e.cold(ctx)
	if err != nil {
		return err
	}
	pool, err := e.openServer(ctx, poolKind, e.o.PoolSize, nil)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := e.closeAndCheck(pool); cerr != nil && err == nil {
			err = cerr
		}
	}()
	python, err := hostPython()
	if err != nil {
		return err
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		e.note("bubblewrap (bwrap) not found: its row is left out (apt-get install -y bubblewrap)")
		bwrap = ""
	}
	if _, err := pool.c.WaitPoolFull(ctx, 3*time.Minute); err != nil {
		return err
	}
	// A running sandbox on the pooled server, for the streamed exec the
	// pooled create+exec is held against (same server, same moments).
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
	if _, err := pool.c.WaitPoolFull(ctx, 3*time.Minute); err != nil {
		return err
	}
	pooledDir := filepath.Join(pool.dataDir(), "gvisor", "sandboxes")

	var coldD, coldCreate, pooledD, pooledCreate, refill, bareD, bwrapD, hostD []time.Duration
	var coldExecD, pooledExecD, runExecD []time.Duration
	notClaimed, notClaimedExec := 0, 0
	for i := -1; i < e.o.Runs; i++ { // i == -1 warms every path up, unrecorded
		if err := ctx.Err(); err != nil {
			return err
		}
		// Each path with and without the command on the create, in turn
		// first and second, so that neither always follows the other.
		order := []bool{false, true}
		if i%2 != 0 {
			order = []bool{true, false}
		}
		for _, withExec := range order {
			// Pooled: the pool is full (waited for below, after the
			// previous claim); the sandbox handed out must be one that
			// was booted before.
			before, _ := os.ReadDir(pooledDir)
			first := pool.c.CreateToFirstOutput
			if withExec {
				first = pool.c.CreateWithExecFirstOutput
			}
			ps, err := first(ctx, pythonArgv, pythonOut)
			if err != nil {
				if ps.ID != "" {
					_ = pool.c.Del(context.WithoutCancel(ctx), ps.ID)
				}
				return fmt.Errorf("pooled (command on the create: %v): %w", withExec, err)
			}
			// The refill runs from the claim (the create's answer) until
			// health reports the pool full again; the claimed sandbox is
			// deleted after that, so its teardown is not in the refill.
			full, err := pool.c.WaitPoolFull(ctx, 2*time.Minute)
			if derr := pool.c.Del(context.WithoutCancel(ctx), ps.ID); derr != nil && err == nil {
				err = derr
			}
			if err != nil {
				return err
			}
			claimed := slices.ContainsFunc(before, func(en os.DirEntry) bool { return en.Name() == ps.ID })
			switch {
			case i < 0:
			case withExec:
				pooledExecD = append(pooledExecD, ps.Total)
				if !claimed {
					notClaimedExec++
				}
			default:
				pooledD = append(pooledD, ps.Total)
				pooledCreate = append(pooledCreate, ps.Create)
				refill = append(refill, full.Sub(ps.Created))
				if !claimed {
					notClaimed++
				}
			}
		}
		// The baseline of the pooled create+exec: the same command streamed
		// into the running sandbox, to its first output.
		d, err := pool.c.ExecToFirstOutput(ctx, runID, pythonArgv, pythonOut)
		if err != nil {
			return fmt.Errorf("exec in a running sandbox: %w", err)
		}
		if i >= 0 {
			runExecD = append(runExecD, d)
		}
		for _, withExec := range order {
			first := cold.c.CreateToFirstOutput
			if withExec {
				first = cold.c.CreateWithExecFirstOutput
			}
			cs, err := first(ctx, pythonArgv, pythonOut)
			if cs.ID != "" {
				if derr := cold.c.Del(context.WithoutCancel(ctx), cs.ID); derr != nil && err == nil {
					err = derr
				}
			}
			if err != nil {
				return fmt.Errorf("cold (command on the create: %v): %w", withExec, err)
			}
			switch {
			case i < 0:
			case withExec:
				coldExecD = append(coldExecD, cs.Total)
			default:
				coldD = append(coldD, cs.Total)
				coldCreate = append(coldCreate, cs.Create)
			}
		}

		// Baselines.
		d, err = e.bare.RunFirstOutput(ctx, pythonArgv, pythonOut)
		if err != nil {
			return fmt.Errorf("bare runsc run: %w", err)
		}
		if i >= 0 {
			bareD = append(bareD, d)
		}
		if bwrap != "" {
			d, err = bwrapFirstOutput(bwrap, e.rootfs, []string{"/usr/bin/python3", "-c", "print(6*7)"}, pythonOut)
			if err != nil {
				return fmt.Errorf("bwrap: %w", err)
			}
			if i >= 0 {
				bwrapD = append(bwrapD, d)
			}
		}
		d, err = hostFirstOutput(python, pythonArgv, pythonOut)
		if err != nil {
			return fmt.Errorf("host python3: %w", err)
		}
		if i >= 0 {
			hostD = append(hostD, d)
		}
		if i >= 0 && (i+1)%10 == 0 {
			fmt.Fprintf(os.Stderr, "suite: startup %d/%d\n", i+1, e.o.Runs)
		}
	}
	const sec = "startup"
	rCold := e.add(sampleRow(sec, "API create→first output, cold", "ms", stats.MSSamples(coldD)))
	rPooled := e.add(sampleRow(sec, "API create→first output, pooled", "ms", stats.MSSamples(pooledD)))
	rColdExec := e.add(sampleRow(sec, "API create+exec→first output, cold", "ms", stats.MSSamples(coldExecD)))
	rPooledExec := e.add(sampleRow(sec, "API create+exec→first output, pooled", "ms", stats.MSSamples(pooledExecD)))
	rColdCreate := e.add(sampleRow(sec, "API create (POST answered), cold", "ms", stats.MSSamples(coldCreate)))
	rPooledCreate := e.add(sampleRow(sec, "API create (POST answered), pooled", "ms", stats.MSSamples(pooledCreate)))
	rRefill := e.add(sampleRow(sec, "pool refill after a claim", "ms", stats.MSSamples(refill)))
	rRunExec := e.add(sampleRow(sec, "API exec→first output, running sandbox", "ms", stats.MSSamples(runExecD)))
	rRunExec.Baseline, rRunExec.Short = true, "exec in a running sandbox"
	compare(rPooledExec, rRunExec)
	rBare := e.add(sampleRow(sec, "bare runsc run", "ms", stats.MSSamples(bareD)))
	rBare.Baseline, rBare.Short = true, "bare runsc run"
	compare(rCold, rBare)
	compare(rPooled, rBare)
	compare(rColdExec, rBare)
	if rColdExec.Ratio != nil {
		// The target: at most 1.1 times bare runsc run.
		met := "met"
		if *rColdExec.Ratio > 1.1 {
			met = "NOT met"
		}
		rColdExec.Vs += " (target ≤ 1.1: " + met + ")"
	}
	compare(rColdCreate, rBare)
	compare(rPooledCreate, rBare)
	rColdCreate.Short = "cold create"
	compare(rRefill, rColdCreate)
	rts := map[string]*row{"cold": rCold, "pooled": rPooled, "cold+exec": rColdExec, "pooled+exec": rPooledExec}
	againstRuntime(rBare, rts, "cold", "pooled", "cold+exec", "pooled+exec")
	if bwrap != "" {
		rb := e.add(sampleRow(sec, "bubblewrap, same root", "ms", stats.MSSamples(bwrapD)))
		rb.Baseline = true
		againstRuntime(rb, rts, "cold", "pooled", "cold+exec", "pooled+exec")
	}
	rHost := e.add(sampleRow(sec, "host python3 (floor)", "ms", stats.MSSamples(hostD)))
	rHost.Baseline = true
	againstRuntime(rHost, rts, "cold", "pooled", "cold+exec", "pooled+exec")
	// Paired: each iteration's sample ÷ that iteration's bare runsc run,
	// steadier than the ratio of medians when the host's load drifts.
	paired := func(ds []time.Duration) string {
		if len(ds) != len(bareD) || len(ds) == 0 {
			return ""
		}
		rs := make([]float64, len(ds))
		for i := range ds {
			rs[i] = float64(ds[i]) / float64(bareD[i])
		}
		return fmt.Sprintf("median of per-iteration ratios to bare runsc run: %.2f", *sampleRow("", "", "", rs).Median)
	}
	rCold.Note, rColdExec.Note = paired(coldD), paired(coldExecD)
	rPooled.Note = paired(pooledD)
	rPooledExec.Note = paired(pooledExecD)
	if len(runExecD) == len(pooledExecD) && len(runExecD) > 0 {
		// The target: at most 1.15 times an exec of the same
		// command in a running sandbox.
		rs := make([]float64, len(runExecD))
		for i := range rs {
			rs[i] = float64(pooledExecD[i]) / float64(runExecD[i])
		}
		pr := *sampleRow("", "", "", rs).Median
		met := "met"
		if pr > 1.15 {
			met = "NOT met"
		}
		rRunExec.Note = fmt.Sprintf("pooled create+exec ÷ this, median of per-iteration ratios: %.2f (target ≤ 1.15: %s)", pr, met)
	}
	if notClaimed > 0 {
		rPooled.Note = fmt.Sprintf("%d of %d samples got a sandbox that was not in the pool before; %s", notClaimed, len(pooledD), rPooled.Note)
		e.note("startup: %s", rPooled.Note)
	}
	if notClaimedExec > 0 {
		rPooledExec.Note = fmt.Sprintf("%d of %d samples got a sandbox that was not in the pool before; %s", notClaimedExec, len(pooledExecD), rPooledExec.Note)
		e.note("startup: %s", rPooledExec.Note)
	}
	return nil
}
