package stats

import (
	"slices"
	"testing"
)

func TestSummarize(t *testing.T) {
	if m, p90, p99 := Summarize(nil); m != nil || p90 != nil || p99 != nil {
		t.Fatalf("no samples: got %v %v %v, want nils", m, p90, p99)
	}
	in := []float64{4, 1, 3, 2}
	m, p90, p99 := Summarize(in)
	if *m != 2.5 || *p90 != 4 || *p99 != 4 {
		t.Errorf("1..4: median %v p90 %v p99 %v, want 2.5 4 4", *m, *p90, *p99)
	}
	if !slices.Equal(in, []float64{4, 1, 3, 2}) {
		t.Errorf("samples modified: %v", in)
	}
	var hundred []float64
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, float64(i))
	}
	m, p90, p99 = Summarize(hundred)
	if *m != 50.5 || *p90 != 90 || *p99 != 99 {
		t.Errorf("1..100: median %v p90 %v p99 %v, want 50.5 90 99", *m, *p90, *p99)
	}
}

func TestShort(t *testing.T) {
	for v, want := range map[float64]string{231.4: "231", 23.14: "23.1", 2.314: "2.31", 0.5: "0.50"} {
		if got := Short(v); got != want {
			t.Errorf("Short(%v) = %q, want %q", v, got, want)
		}
	}
}
