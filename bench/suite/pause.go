package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"withruntime.dev/runtime/bench/internal/stats"
	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// pauseRuns caps the pause section's samples: a cycle of the 200 MiB
// sandbox writes and reads its whole image.
const pauseRuns = 10

// hold200 keeps 200 MiB of Python objects (200 Ki bytes objects of 1 KiB)
// alive in a background process and says so in /tmp/held.
const hold200 = `python3 -c '
import time
x = [bytes(1024) for _ in range(200 * 1024)]
open("/tmp/held", "w").write(str(len(x)))
time.sleep(10**6)'`

// pause measures POST .../pause and resume→first output (POST .../resume,
// then a streamed exec of python3 up to its first stdout) of an idle
// sandbox and of one holding 200 MiB of Python objects, with the image's
// size on the host, against create→first output of a cold sandbox
// measured alongside (the goal: resume→first output ≤ 2× that).
func (e *env) pause(ctx context.Context) (err error) {
	cold, err := e.cold(ctx)
	if err != nil {
		return err
	}
	c := cold.c
	runs := min(e.o.Runs, pauseRuns)
	var coldD []time.Duration
	type variant struct {
		name, setup      string
		pauseD, resumeD  []time.Duration
		imageMiB, resume []float64
	}
	vs := []*variant{{name: "idle"}, {name: "200 MiB of Python objects", setup: hold200}}
	for _, v := range vs {
		id, err := c.Create(ctx, api.CreateSandboxRequest{TimeoutSeconds: 3600})
		if id != "" {
			defer func() {
				if derr := c.Del(context.WithoutCancel(ctx), id); derr != nil && err == nil {
					err = derr
				}
			}()
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
			var sb api.Sandbox
			if err := c.GetJSON(ctx, "POST", "/v1/sandboxes/"+id+"/pause", nil, &sb); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			pd := time.Since(start)
			start = time.Now()
			if err := c.GetJSON(ctx, "POST", "/v1/sandboxes/"+id+"/resume", nil, nil); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			if _, err := c.StreamToFirstOutput(ctx, id, pythonArgv, pythonOut); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			rd := time.Since(start)
			if i >= 0 {
				v.pauseD = append(v.pauseD, pd)
				v.resumeD = append(v.resumeD, rd)
				v.imageMiB = append(v.imageMiB, float64(sb.ImageBytes)/(1<<20))
			}
		}
		fmt.Fprintf(os.Stderr, "suite: pause %s done\n", v.name)
	}
	for i := -1; i < runs; i++ {
		cs, err := c.CreateToFirstOutput(ctx, pythonArgv, pythonOut)
		if cs.ID != "" {
			if derr := c.Del(context.WithoutCancel(ctx), cs.ID); derr != nil && err == nil {
				err = derr
			}
		}
		if err != nil {
			return fmt.Errorf("cold: %w", err)
		}
		if i >= 0 {
			coldD = append(coldD, cs.Total)
		}
	}
	const sec = "pause"
	rCold := e.add(sampleRow(sec, "API create→first output, cold (alongside)", "ms", stats.MSSamples(coldD)))
	rCold.Baseline, rCold.Short = true, "cold create→first output"
	for _, v := range vs {
		e.add(sampleRow(sec, "pause, "+v.name, "ms", stats.MSSamples(v.pauseD)))
		r := e.add(sampleRow(sec, "resume→first output, "+v.name, "ms", stats.MSSamples(v.resumeD)))
		compare(r, rCold)
		e.add(sampleRow(sec, "image on the host, "+v.name, "MiB", v.imageMiB))
	}
	return nil
}
