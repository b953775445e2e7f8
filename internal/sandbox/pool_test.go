package sandbox

import (
	"testing"
	"time"
)

// TestPoolTarget: the pool keeps the most creates that arrived within one
// second over the window, between Size and Max, and forgets creates older
// than the window.
func TestPoolTarget(t *testing.T) {
	p := &pool{cfg: PoolConfig{Size: 2, Max: 6, RateWindow: 10 * time.Second}, demand: map[string][]time.Time{}}
	now := time.Unix(1000, 0)
	if got := p.targetLocked("base", now); got != 2 {
		t.Errorf("no demand: %d, want the floor 2", got)
	}
	// One create a second for 8 s: never more than one within a second.
	for i := 0; i < 8; i++ {
		p.demand["base"] = append(p.demand["base"], now.Add(time.Duration(i)*time.Second))
	}
	if got := p.targetLocked("base", now.Add(8*time.Second)); got != 2 {
		t.Errorf("one a second: %d, want the floor 2", got)
	}
	// A burst of 4 within 300 ms on top.
	for i := 0; i < 4; i++ {
		p.demand["base"] = append(p.demand["base"], now.Add(8*time.Second+time.Duration(i)*100*time.Millisecond))
	}
	if got := p.targetLocked("base", now.Add(9*time.Second)); got != 4 {
		t.Errorf("burst: %d, want 4 (the one at 7 s is a second before)", got)
	}
	// A burst of 20: capped at Max.
	for i := 0; i < 20; i++ {
		p.demand["base"] = append(p.demand["base"], now.Add(9*time.Second))
	}
	if got := p.targetLocked("base", now.Add(9*time.Second)); got != 6 {
		t.Errorf("big burst: %d, want the max 6", got)
	}
	// The window passes: back to the floor, and the old demand is dropped.
	if got := p.targetLocked("base", now.Add(20*time.Second)); got != 2 {
		t.Errorf("after the window: %d, want the floor 2", got)
	}
	if n := len(p.demand["base"]); n != 0 {
		t.Errorf("%d creates older than the window kept", n)
	}
	// Another template's demand is its own.
	if got := p.targetLocked("code", now); got != 2 {
		t.Errorf("other template: %d, want 2", got)
	}
}
