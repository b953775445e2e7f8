package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"

	"withruntime.dev/runtime/bench/internal/benchenv"
	"withruntime.dev/runtime/bench/internal/stats"
)

// row is one line of the table.
type row struct {
	Section   string    `json:"section"`
	Name      string    `json:"name"`
	Unit      string    `json:"unit"`
	Samples   []float64 `json:"samples,omitempty"`
	N         int       `json:"n"`
	Median    *float64  `json:"median,omitempty"`
	P90       *float64  `json:"p90,omitempty"`
	P99       *float64  `json:"p99,omitempty"`
	Value     *float64  `json:"value,omitempty"`
	ValueUnit string    `json:"valueUnit,omitempty"`
	Ratio     *float64  `json:"ratio,omitempty"`
	Vs        string    `json:"vs"`
	Failures  int       `json:"failures"`
	Note      string    `json:"note,omitempty"`
	Short     string    `json:"-"`
}

func (e *env) add(r *row) *row {
	e.res.Rows = append(e.res.Rows, r)
	return r
}

func (e *env) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	e.res.Notes = append(e.res.Notes, s)
	fmt.Fprintln(os.Stderr, "scale: note:", s)
}

// sampleRow summarises samples: median, and p90 and p99 by nearest rank
// (the smallest sample with at least that share at or below it; with
// fewer than 100 samples p99 is the largest).
func sampleRow(section, name, unit string, samples []float64) *row {
	r := &row{Section: section, Name: name, Unit: unit, Samples: samples, N: len(samples)}
	r.Median, r.P90, r.P99 = stats.Summarize(samples)
	return r
}

// compare sets r's ratio to base on the medians, and notes the p99s'.
func compare(r, base *row) {
	if r.Median == nil || base.Median == nil || *base.Median == 0 {
		return
	}
	r.Ratio = stats.F64(*r.Median / *base.Median)
	r.Vs = fmt.Sprintf("%s× %s (p50)", fx(*r.Ratio), base.Short)
	if r.P99 != nil && base.P99 != nil && *base.P99 > 0 {
		r.Vs += fmt.Sprintf(", %s× (p99)", fx(*r.P99 / *base.P99))
	}
}

func fx(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func num(p *float64) string {
	if p == nil {
		return "-"
	}
	return stats.Short(*p)
}

func printTable(w io.Writer, res *results) {
	o := res.Options
	fmt.Fprintf(w, "scale: %d idle sandboxes (%s); %d CPUs, %d MiB (MemAvailable %d MiB at the start), %s\n",
		o.N, o.NReason, res.Host.CPUs, res.Host.MemTotalMiB, res.Host.MemAvailMiB, res.Host.Runsc)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "section\trow\tn\tmedian\tp90\tp99\tunit\tfigure\tfailures\tvs")
	for _, r := range res.Rows {
		fig := "-"
		if r.Value != nil {
			fig = num(r.Value) + " " + r.ValueUnit
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.Section, r.Name, r.N,
			num(r.Median), num(r.P90), num(r.P99), r.Unit, fig, r.Failures, r.Vs)
	}
	tw.Flush()
	u := res.Server
	fmt.Fprintf(w, "server (this process: server and the benchmark's client): RSS %.0f MiB with none, %.0f MiB with %d held (%.1f KiB per sandbox), %.0f MiB after deleting them; Go heap %.1f → %.1f MiB; %d goroutines held\n",
		u.RSSBeforeMiB, u.RSSHeldMiB, o.N, 1024*(u.RSSHeldMiB-u.RSSBeforeMiB)/float64(max(o.N, 1)), u.RSSAfterMiB, u.HeapBeforeMiB, u.HeapHeldMiB, u.Goroutines)
	fmt.Fprintf(w, "server CPU: %.2f%% of a core idle (%.0f s window), %.1f%% while exec'ing among them, %.1f%% during the churn\n",
		u.IdleCPUPct, o.IdleWindowS, u.ExecCPUPct, u.ChurnCPUPct)
	fmt.Fprintf(w, "store: %.1f KiB empty, %.1f KiB with %d held, %.1f KiB after deleting them; host MemAvailable drop with them held: %.0f MiB (%.1f MiB per sandbox)\n",
		float64(u.StoreBeforeBytes)/1024, float64(u.StoreHeldBytes)/1024, o.N, float64(u.StoreAfterBytes)/1024,
		u.MemAvailDropMiB, u.MemAvailDropMiB/float64(max(o.N, 1)))
	for _, n := range res.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	benchenv.PrintChecks(w, res.Checks)
	if res.Error != "" {
		fmt.Fprintln(w, "error:", res.Error)
	}
}
