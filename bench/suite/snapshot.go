package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"withruntime.dev/runtime/bench/internal/apiclient"
	"withruntime.dev/runtime/bench/internal/stats"
	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// snapshotRuns caps the snapshot section's samples: a snapshot of the
// 200 MiB sandbox writes its whole image, a fork of 8 restores it 8 times.
const snapshotRuns = 5

// snapshotSection measures, for an idle sandbox and one holding 200 MiB of
// Python objects: POST .../snapshots (the sandbox runs on) and the image's
// size; create from the snapshot→first output of python3 (POST
// /v1/sandboxes {snapshot}, then a streamed exec to its first stdout),
// against a cold create→first output, bare `runsc run` of the same command
// and bare `runsc restore` of a bare sandbox's image followed by `runsc
// exec` of it (runsc's own floor for this row), measured alongside; and,
// for the
// 200 MiB sandbox, a fork of 8 (POST .../fork, all 8 running) against 8
// resumes of the same sandbox one after another (the goal: fork ≤
// 0.5 × the resumes).
func (e *env) snapshotSection(ctx context.Context) (err error) {
	cold, err := e.cold(ctx)
	if err != nil {
		return err
	}
	c := cold.c
	runs := min(e.o.Runs, snapshotRuns)
	var coldD, forkD, resumes8D []time.Duration
	type variant struct {
		name, setup  string
		snapD, fromD []time.Duration
		imageMiB     []float64
	}
	vs := []*variant{{name: "idle"}, {name: "200 MiB of Python objects", setup: hold200}}
	del := func(id string) {
		if derr := c.Del(context.WithoutCancel(ctx), id); derr != nil && err == nil {
			err = derr
		}
	}
	for _, v := range vs {
		id, err := c.Create(ctx, api.CreateSandboxRequest{TimeoutSeconds: 3600})
		if id != "" {
			defer del(id)
		}
		if err != nil {
			return err
		}
		if v.setup != "" {
			var p agentapi.Process
			if err := c.GetJSON(ctx, "POST", "/v1/sandboxes/"+id+"/processes", agentapi.ExecRequest{Command: v.setup}, &p); err != nil {
				return err
			}
			wait := []string{"bash", "-c", "for i in $(seq 600); do test -s /tmp/held && exit 0; sleep 0.1; done; exit 1"}
			if _, err := c.ExecCollected(ctx, id, wait, ""); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
		}
		for i := -1; i < runs; i++ { // i == -1 warms up, unrecorded
			start := time.Now()
			var sn api.Snapshot
			if err := c.GetJSON(ctx, "POST", "/v1/sandboxes/"+id+"/snapshots", nil, &sn); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			sd := time.Since(start)
			start = time.Now()
			from, err := c.Create(ctx, api.CreateSandboxRequest{Snapshot: sn.ID, TimeoutSeconds: 600})
			if from != "" {
				defer del(from)
			}
			if err != nil {
				return fmt.Errorf("%s: create from the snapshot: %w", v.name, err)
			}
			if _, err := c.StreamToFirstOutput(ctx, from, pythonArgv, pythonOut); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			fd := time.Since(start)
			if err := c.GetJSON(ctx, "DELETE", "/v1/snapshots/"+sn.ID, nil, nil); err != nil {
				return err
			}
			if i >= 0 {
				v.snapD = append(v.snapD, sd)
				v.fromD = append(v.fromD, fd)
				v.imageMiB = append(v.imageMiB, float64(sn.Bytes)/(1<<20))
			}
		}
		if v.setup != "" {
			if err := forkVsResumes(ctx, c, id, runs, &forkD, &resumes8D); err != nil {
				return err
			}
		}
		fmt.Fprintf(os.Stderr, "suite: snapshot %s done\n", v.name)
	}
	var bareD, bareRestoreD []time.Duration
	// What a restore costs runsc itself: a bare sandbox's image, restored
	// and the same command exec'd in it.
	img, err := e.bare.Checkpoint(ctx)
	if err != nil {
		return fmt.Errorf("bare runsc checkpoint: %w", err)
	}
	defer os.RemoveAll(img)
	for i := -1; i < runs; i++ {
		cs, err := c.CreateToFirstOutput(ctx, pythonArgv, pythonOut)
		if cs.ID != "" {
			del(cs.ID)
		}
		if err != nil {
			return fmt.Errorf("cold: %w", err)
		}
		// The baseline: bare `runsc run` of the same command.
		d, err := e.bare.RunFirstOutput(ctx, pythonArgv, pythonOut)
		if err != nil {
			return fmt.Errorf("bare runsc run: %w", err)
		}
		dr, err := e.bare.RestoreExec(ctx, img, pythonArgv, pythonOut)
		if err != nil {
			return fmt.Errorf("bare runsc restore: %w", err)
		}
		if i >= 0 {
			coldD = append(coldD, cs.Total)
			bareD = append(bareD, d)
			bareRestoreD = append(bareRestoreD, dr)
		}
	}
	const sec = "snapshot"
	rCold := e.add(sampleRow(sec, "API create→first output, cold (alongside)", "ms", stats.MSSamples(coldD)))
	rCold.Baseline, rCold.Short = true, "cold create→first output"
	rBare := e.add(sampleRow(sec, "bare runsc run (alongside)", "ms", stats.MSSamples(bareD)))
	rBare.Baseline, rBare.Short = true, "bare runsc run"
	rBareRestore := e.add(sampleRow(sec, "bare runsc restore + exec (alongside)", "ms", stats.MSSamples(bareRestoreD)))
	compare(rBareRestore, rBare)
	rBareRestore.Note = "runsc's own floor for a create from a snapshot: restore, then the command"
	for _, v := range vs {
		e.add(sampleRow(sec, "snapshot, "+v.name, "ms", stats.MSSamples(v.snapD)))
		e.add(sampleRow(sec, "image on the host, "+v.name, "MiB", v.imageMiB))
		r := e.add(sampleRow(sec, "create from the snapshot→first output, "+v.name, "ms", stats.MSSamples(v.fromD)))
		compare(r, rBare)
		if r.Median != nil && rCold.Median != nil && *rCold.Median > 0 {
			r.Note = fmt.Sprintf("%.2f× cold create→first output", *r.Median / *rCold.Median)
		}
		if v.setup == "" && r.Ratio != nil {
			// Issue 26's goal: at most 0.7 times bare runsc run.
			met := "met"
			if *r.Ratio > 0.7 {
				met = "not met"
			}
			r.Note += fmt.Sprintf("; issue 26's goal (≤ 0.7× bare runsc run): %s", met)
			if rBareRestore.Median != nil && *rBareRestore.Median > 0 {
				r.Note += fmt.Sprintf("; %.2f× bare runsc restore + exec", *r.Median / *rBareRestore.Median)
			}
		}
	}
	rRes := e.add(sampleRow(sec, "8 resumes one after another, 200 MiB (alongside)", "ms", stats.MSSamples(resumes8D)))
	rRes.Baseline, rRes.Short = true, "8 resumes"
	r := e.add(sampleRow(sec, "fork of 8, 200 MiB (all 8 running)", "ms", stats.MSSamples(forkD)))
	compare(r, rRes)
	return nil
}

// forkVsResumes times, runs times each, a fork of 8 of sandbox id (the 8
// deleted after) and 8 pause+resume cycles of it, of which the resumes
// are summed.
func forkVsResumes(ctx context.Context, c *apiclient.Client, id string, runs int, forkD, resumesD *[]time.Duration) error {
	for i := -1; i < runs; i++ {
		start := time.Now()
		var fr api.ForkResult
		if err := c.GetJSON(ctx, "POST", "/v1/sandboxes/"+id+"/fork", api.ForkRequest{Count: 8, TimeoutSeconds: 600}, &fr); err != nil {
			return fmt.Errorf("fork: %w", err)
		}
		fd := time.Since(start)
		var ids []string
		for _, f := range fr.Sandboxes {
			if f.Sandbox == nil {
				return fmt.Errorf("fork: a sandbox failed: %+v", f.Error)
			}
			ids = append(ids, f.Sandbox.ID)
		}
		if err := c.DeleteAll(ctx, ids, 4); err != nil {
			return err
		}
		var sum time.Duration
		for range 8 {
			if err := c.GetJSON(ctx, "POST", "/v1/sandboxes/"+id+"/pause", nil, nil); err != nil {
				return fmt.Errorf("pause: %w", err)
			}
			start := time.Now()
			if err := c.GetJSON(ctx, "POST", "/v1/sandboxes/"+id+"/resume", nil, nil); err != nil {
				return fmt.Errorf("resume: %w", err)
			}
			sum += time.Since(start)
		}
		if i >= 0 {
			*forkD = append(*forkD, fd)
			*resumesD = append(*resumesD, sum)
		}
	}
	return nil
}
