package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"withruntime.dev/runtime/bench/internal/benchenv"
	"withruntime.dev/runtime/bench/internal/stats"
)

// row is one line of the table: the samples of one measurement and how it
// compares with its baseline.
type row struct {
	Section string `json:"section"`
	Name    string `json:"name"`
	// Baseline is true for the rows measured without Runtime.
	Baseline bool      `json:"baseline"`
	Unit     string    `json:"unit"`
	Samples  []float64 `json:"samples,omitempty"`
	N        int       `json:"n"`
	Median   *float64  `json:"median,omitempty"`
	P90      *float64  `json:"p90,omitempty"`
	P99      *float64  `json:"p99,omitempty"`
	// Value is a single figure (a rate, a total) in ValueUnit.
	Value     *float64 `json:"value,omitempty"`
	ValueUnit string   `json:"valueUnit,omitempty"`
	// Ratio is this row ÷ the row named Versus (on the median, or on Value
	// for rates); Vs is the text the table shows.
	Ratio    *float64 `json:"ratio,omitempty"`
	Versus   string   `json:"versus,omitempty"`
	Vs       string   `json:"vs"`
	Failures int      `json:"failures"`
	Note     string   `json:"note,omitempty"`
	// Short names the row in other rows' ratio text (default Name).
	Short string `json:"-"`
}

func (r *row) label() string {
	if r.Short != "" {
		return r.Short
	}
	return r.Name
}

func (e *env) add(r *row) *row {
	e.res.Rows = append(e.res.Rows, r)
	return r
}

func (e *env) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	e.res.Notes = append(e.res.Notes, s)
	fmt.Fprintln(os.Stderr, "suite: note:", s)
}

// sampleRow summarises samples: median, and p90 and p99 by nearest rank
// (the smallest sample with at least that share of samples at or below it;
// with fewer than 100 samples p99 is the largest).
func sampleRow(section, name, unit string, samples []float64) *row {
	r := &row{Section: section, Name: name, Unit: unit, Samples: samples, N: len(samples)}
	r.Median, r.P90, r.P99 = stats.Summarize(samples)
	return r
}

// compare sets r's ratio to base on the medians ("2.31× bare runsc run").
func compare(r, base *row) {
	if r.Median == nil || base.Median == nil || *base.Median == 0 {
		return
	}
	r.Ratio = stats.F64(*r.Median / *base.Median)
	r.Versus = base.Name
	r.Vs = fmt.Sprintf("%s× %s", stats.Short(*r.Ratio), base.label())
}

// compareValue sets r's ratio to base on their values (rates).
func compareValue(r, base *row) {
	if r.Value == nil || base.Value == nil || *base.Value == 0 {
		return
	}
	r.Ratio = stats.F64(*r.Value / *base.Value)
	r.Versus = base.Name
	r.Vs = fmt.Sprintf("%s× %s", stats.Short(*r.Ratio), base.label())
}

// againstRuntime sets a baseline row's text: each Runtime row's median ÷
// this one's ("Runtime cold 2.6×, pooled 1.1× this").
func againstRuntime(base *row, rts map[string]*row, order ...string) {
	if base.Median == nil || *base.Median == 0 {
		return
	}
	var parts []string
	for _, label := range order {
		r := rts[label]
		if r == nil || r.Median == nil {
			continue
		}
		parts = append(parts, strings.TrimSpace(fmt.Sprintf("%s %s×", label, stats.Short(*r.Median / *base.Median))))
	}
	if len(parts) > 0 {
		base.Vs = "Runtime " + strings.Join(parts, ", ") + " this"
	}
}

func num(p *float64) string {
	if p == nil {
		return "-"
	}
	v := *p
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

func printTable(w io.Writer, res *results) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "section\trow\tn\tmedian\tp90\tp99\tunit\tfigure\tratio\t")
	last := ""
	for _, r := range res.Rows {
		sec := r.Section
		if sec == last {
			sec = ""
		} else if last != "" {
			fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t\t")
		}
		last = r.Section
		name := r.Name
		if r.Baseline {
			name = "  " + name
		}
		fig := ""
		if r.Value != nil {
			fig = num(r.Value) + " " + r.ValueUnit
		}
		if r.Failures > 0 {
			fig += fmt.Sprintf(" (%d failed)", r.Failures)
		}
		n := strconv.Itoa(r.N)
		if r.N == 0 {
			n = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", sec, name, n, num(r.Median), num(r.P90), num(r.P99), r.Unit, strings.TrimSpace(fig), r.Vs)
	}
	tw.Flush()
	for _, r := range res.Rows {
		if r.Note != "" && !slices.Contains(res.Notes, r.Section+": "+r.Note) {
			fmt.Fprintf(w, "note (%s): %s\n", r.Name, r.Note)
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	benchenv.PrintChecks(w, res.Checks)
}
