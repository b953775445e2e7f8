package main

import "testing"

// TestUSDToMicros: a daily limit is converted exactly, and one that would
// overflow (wrapping into a negative number) or round to no limit at all
// is refused.
func TestUSDToMicros(t *testing.T) {
	for v, want := range map[float64]int64{0: 0, 5: 5_000_000, 0.25: 250_000, 0.000001: 1, 1e9: 1e15} {
		if got, err := usdToMicros(v); err != nil || got != want {
			t.Errorf("usdToMicros(%v) = %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []float64{-1, 1e30, 1e9 + 1, 1e-7} {
		if got, err := usdToMicros(v); err == nil {
			t.Errorf("usdToMicros(%v) = %d, want an error", v, got)
		}
	}
}
