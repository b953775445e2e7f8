package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"withruntime.dev/runtime/bench/internal/benchenv"
	"withruntime.dev/runtime/bench/internal/stats"
)

// results are the run's samples and summaries, written as JSON.
type results struct {
	Started time.Time `json:"started"`
	Host    hostInfo  `json:"host"`
	// Runs is the number of complete iterations recorded.
	Runs     int      `json:"runs"`
	Paths    []string `json:"paths"`
	Template string   `json:"template"`
	// Loads is the load average (1, 5, 15 min) at each iteration's start
	// and at the end.
	Loads []string `json:"loads"`
	Steps []*row   `json:"steps"`
	// Ref is the path the ratios divide: runtime, or without it the first
	// of -envs (e.g. bare-erofs against bare-rt).
	Ref string `json:"ref"`
	// GeoMean is, per ratio, the geometric mean over the steps of the
	// ratios of medians.
	GeoMean map[string]float64 `json:"geoMean"`
}

type hostInfo struct {
	CPUs        int    `json:"cpus"`
	MemTotalMiB int64  `json:"memTotalMiB"`
	Kernel      string `json:"kernel"`
	Runsc       string `json:"runsc"`
	// RunscFlags is $WITHRUNTIME_RUNSC_FLAGS, given to Runtime's runsc
	// (and to bare-rt's), never to bare's.
	RunscFlags string `json:"runscFlags"`
	DiskMedium string `json:"diskMedium"`
}

// row is one step: seconds per path, in iteration order.
type row struct {
	Group   string               `json:"group"`
	Name    string               `json:"name"`
	Seconds map[string][]float64 `json:"seconds"`
	Median  map[string]float64   `json:"median"`
	P90     map[string]float64   `json:"p90"`
	// Ratio is the reference path's median (Runtime's, or without it the
	// first of -envs: results.Ref) ÷ each other path's; Paired the median
	// of the per-iteration ratios (steadier when the host's load drifts).
	Ratio  map[string]float64 `json:"ratio"`
	Paired map[string]float64 `json:"paired"`
}

func newResults(o options, runsc, rootfs string) *results {
	return &results{Started: time.Now().UTC(), Paths: o.envs, Template: rootfs,
		Host: hostInfo{CPUs: runtime.NumCPU(), MemTotalMiB: benchenv.Meminfo("MemTotal") >> 20,
			Kernel: benchenv.KernelRelease(), Runsc: benchenv.RunscVersion(runsc),
			RunscFlags: os.Getenv("WITHRUNTIME_RUNSC_FLAGS"), DiskMedium: o.diskMedium}}
}

// add records one group's step times on path.
func (r *results) add(g group, path string, times []time.Duration) {
	for i, s := range g.steps {
		var rw *row
		for _, x := range r.Steps {
			if x.Group == g.name && x.Name == s.name {
				rw = x
			}
		}
		if rw == nil {
			rw = &row{Group: g.name, Name: s.name, Seconds: map[string][]float64{}}
			r.Steps = append(r.Steps, rw)
		}
		rw.Seconds[path] = append(rw.Seconds[path], times[i].Seconds())
	}
}

// finish computes medians, p90s, ratios and the geometric means.
func (r *results) finish() {
	r.Ref = r.Paths[0]
	if slices.Contains(r.Paths, "runtime") {
		r.Ref = "runtime"
	}
	logs := map[string][]float64{}
	for _, rw := range r.Steps {
		rw.Median, rw.P90, rw.Ratio, rw.Paired = map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}
		for p, xs := range rw.Seconds {
			m, p90, _ := stats.Summarize(xs)
			rw.Median[p], rw.P90[p] = *m, *p90
		}
		rt, ok := rw.Seconds[r.Ref]
		if !ok {
			continue
		}
		for p, xs := range rw.Seconds {
			if p == r.Ref || len(xs) != len(rt) {
				continue
			}
			rw.Ratio[p] = rw.Median[r.Ref] / rw.Median[p]
			per := make([]float64, len(xs))
			for i := range xs {
				per[i] = rt[i] / xs[i]
			}
			m, _, _ := stats.Summarize(per)
			rw.Paired[p] = *m
			logs[p] = append(logs[p], math.Log(rw.Ratio[p]))
		}
	}
	r.GeoMean = map[string]float64{}
	for p, ls := range logs {
		r.GeoMean[p] = math.Exp(stats.Sum(ls) / float64(len(ls)))
	}
}

// print writes the table: per step, each path's median and p90 (seconds),
// then the reference path (Runtime, or the first of -envs) ÷ each other path (ratio of medians, and the median of
// per-iteration ratios in brackets).
func (r *results) print(w io.Writer) {
	fmt.Fprintf(w, "\nworkloads: %d interleaved runs, %d CPUs, runsc %s, Runtime flags extra %q, disk medium %q\n",
		r.Runs, r.Host.CPUs, r.Host.Runsc, r.Host.RunscFlags, r.Host.DiskMedium)
	fmt.Fprintf(w, "load average at each iteration's start and at the end: %s\n\n", strings.Join(r.Loads, " | "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "step\t"
	for _, p := range r.Paths {
		head += p + " median\t" + p + " p90\t"
	}
	others := slices.DeleteFunc(slices.Clone(r.Paths), func(p string) bool { return p == r.Ref })
	ref := r.Ref
	if ref == "runtime" {
		ref = "Runtime"
	}
	for _, p := range others {
		head += ref + " ÷ " + p + "\t"
	}
	fmt.Fprintln(tw, head)
	for _, rw := range r.Steps {
		line := rw.Name + "\t"
		for _, p := range r.Paths {
			line += fmt.Sprintf("%.2f\t%.2f\t", rw.Median[p], rw.P90[p])
		}
		for _, p := range others {
			if v, ok := rw.Ratio[p]; ok {
				line += fmt.Sprintf("%.2f (%.2f)\t", v, rw.Paired[p])
			} else {
				line += "-\t"
			}
		}
		fmt.Fprintln(tw, line)
	}
	if len(r.GeoMean) > 0 {
		line := "geometric mean\t"
		for range r.Paths {
			line += "\t\t"
		}
		for _, p := range others {
			line += fmt.Sprintf("%.2f\t", r.GeoMean[p])
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nseconds; ratio of medians, (median of per-iteration ratios)")
}

func (r *results) write(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
