// Package stats summarises the benchmarks' samples (median, and p90 and
// p99 by nearest rank) and formats their figures, for bench/suite and
// bench/scale alike.
package stats

import (
	"math"
	"sort"
	"strconv"
	"time"
)

// Summarize returns the median of samples (the mean of the middle two for
// an even count) and their p90 and p99 by nearest rank: the smallest sample
// with at least that share of samples at or below it (with fewer than 100
// samples p99 is the largest). All three are nil for no samples; samples
// is not modified.
func Summarize(samples []float64) (median, p90, p99 *float64) {
	if len(samples) == 0 {
		return nil, nil, nil
	}
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return F64(m), F64(NearestRank(s, 0.90)), F64(NearestRank(s, 0.99))
}

// NearestRank is the q-quantile (0 < q ≤ 1) of sorted (ascending, not
// empty) by nearest rank.
func NearestRank(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// MedianMS is the median of ds in milliseconds (0 for none).
func MedianMS(ds []time.Duration) float64 {
	m, _, _ := Summarize(MSSamples(ds))
	if m == nil {
		return 0
	}
	return *m
}

// MSSamples converts durations to milliseconds.
func MSSamples(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = MS(d)
	}
	return out
}

// MS is d in milliseconds.
func MS(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// F64 returns a pointer to v (rows keep absent figures as nil).
func F64(v float64) *float64 { return &v }

// Sum adds xs.
func Sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

// Short formats v with no decimals from 100 up, one from 10, two below:
// "231", "23.1", "2.31".
func Short(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}
