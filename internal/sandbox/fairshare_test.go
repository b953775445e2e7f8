package sandbox

import (
	"math"
	"slices"
	"testing"
)

func TestFairShares(t *testing.T) {
	light := keyStates{}
	heavyA := keyStates{heavy: map[string]bool{"A": true}}
	cases := []struct {
		name   string
		use    []fairUse
		before keyStates
		shares map[string]float64
		heavy  []string
	}{{
		name:   "a key alone is never heavy; its busy sandboxes split a weight",
		use:    []fairUse{{"a1", "A", 1, 1}, {"a2", "A", 0.9, 1}, {"a3", "A", 0, 1}},
		shares: map[string]float64{"a1": .5, "a2": .5, "a3": .5},
	}, {
		name:   "two keys using about as much: no heavy key (TestFairShareWeights' loops)",
		use:    []fairUse{{"a1", "A", .5, 1}, {"a2", "A", .5, 1}, {"b", "B", 1, 1}},
		shares: map[string]float64{"a1": .5, "a2": .5, "b": 1},
	}, {
		name:   "a key using far more than the other is heavy (the noisy neighbour)",
		use:    []fairUse{{"fill", "A", .75, 1}, {"dns", "A", .25, 1}, {"b", "B", .4, 1}, {"b2", "B", .02, 1}},
		before: keyStates{busy: map[string]bool{"fill": true, "dns": true, "b": true}},
		shares: map[string]float64{"fill": heavyShare / 2, "dns": heavyShare / 2, "b": 1, "b2": 1},
		heavy:  []string{"A"},
	}, {
		name:   "a round in which a key's busy sandboxes came to split its weight makes nobody heavy (TestFairShareWeights' first round)",
		use:    []fairUse{{"a1", "A", .67, 1}, {"a2", "A", .67, 1}, {"b", "B", .67, 1}},
		before: light,
		shares: map[string]float64{"a1": .5, "a2": .5, "b": 1},
	}, {
		name:   "a tenth more than the average is not heavy",
		use:    []fairUse{{"a", "A", .6, 1}, {"b", "B", .55, 1}},
		shares: map[string]float64{"a": 1, "b": 1},
	}, {
		name:   "a heavy key stays heavy while it uses more than the average",
		use:    []fairUse{{"a", "A", .6, 1}, {"b", "B", .5, 1}},
		before: heavyA,
		shares: map[string]float64{"a": heavyShare, "b": 1},
		heavy:  []string{"A"},
	}, {
		name:   "a heavy key whose use fell under the average stays heavy a round, and the round makes no other heavy",
		use:    []fairUse{{"a", "A", .12, 1}, {"b", "B", 1.88, 1}},
		before: heavyA,
		shares: map[string]float64{"a": heavyShare, "b": 1},
		heavy:  []string{"A"},
	}, {
		name:   "a heavy key a little under the average (held on its cores) stays heavy and does not count down",
		use:    []fairUse{{"a", "A", .55, 1}, {"b", "B", .68, 1}},
		before: keyStates{heavy: map[string]bool{"A": true}, under: map[string]int{"A": 1}},
		shares: map[string]float64{"a": heavyShare, "b": 1},
		heavy:  []string{"A"},
	}, {
		name:   "a heavy key that dips under activeCores beside a light key stays heavy a round",
		use:    []fairUse{{"a", "A", .094, 1}, {"b", "B", .73, 1}},
		before: heavyA,
		shares: map[string]float64{"a": heavyShare, "b": 1},
		heavy:  []string{"A"},
	}, {
		name:   "a heavy key under the average for its releaseRounds-th round is light again, and the round makes no other heavy",
		use:    []fairUse{{"a", "A", .12, 1}, {"b", "B", 1.88, 1}},
		before: keyStates{heavy: map[string]bool{"A": true}, under: map[string]int{"A": releaseRounds - 1}},
		shares: map[string]float64{"a": 1, "b": 1},
	}, {
		name:   "a heavy key starved at its low weight keeps its busy sandboxes' count",
		use:    []fairUse{{"a1", "A", .05, 1}, {"a2", "A", .05, 1}, {"b", "B", 1, 1}},
		before: keyStates{heavy: map[string]bool{"A": true}, under: map[string]int{"A": releaseRounds - 1}, busy: map[string]bool{"a1": true, "a2": true}},
		shares: map[string]float64{"a1": .5, "a2": .5, "b": 1},
	}, {
		name:   "while one key stays heavy another can become heavy too",
		use:    []fairUse{{"a", "A", .7, 1}, {"b", "B", .9, 1}, {"c", "C", .3, 1}},
		before: heavyA,
		shares: map[string]float64{"a": heavyShare, "b": heavyShare, "c": 1},
		heavy:  []string{"A", "B"},
	}, {
		name:   "keys with next to no CPU do not count in the average",
		use:    []fairUse{{"a", "A", .9, 1}, {"b", "B", .05, 1}, {"c", "C", .01, 1}},
		shares: map[string]float64{"a": 1, "b": 1, "c": 1},
	}, {
		name:   "a small lead is noise, not heaviness",
		use:    []fairUse{{"a", "A", .15, 1}, {"b", "B", .1, 1}},
		shares: map[string]float64{"a": 1, "b": 1},
	}, {
		name:   "a sandbox of two vCPUs is busy from half a core",
		use:    []fairUse{{"a1", "A", .6, 2}, {"a2", "A", .6, 2}, {"a3", "A", .2, 2}, {"b", "B", 1.2, 2}},
		shares: map[string]float64{"a1": .5, "a2": .5, "a3": .5, "b": 1},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			shares, now := fairShares(c.use, c.before)
			for id, w := range c.shares {
				if math.Abs(shares[id]-w) > 1e-9 {
					t.Errorf("sandbox %s: share %g, want %g", id, shares[id], w)
				}
			}
			if len(shares) != len(c.shares) {
				t.Errorf("shares %v, want %v", shares, c.shares)
			}
			var heavy []string
			for k, h := range now.heavy {
				if h {
					heavy = append(heavy, k)
				}
			}
			slices.Sort(heavy)
			if !slices.Equal(heavy, c.heavy) {
				t.Errorf("heavy keys %v, want %v", heavy, c.heavy)
			}
		})
	}
}

// TestFairSharesHungryKeys runs the policy against a model of two keys that
// both want every core: noise that makes one heavy costs it releaseRounds
// rounds, and the weights do not flip back and forth.
func TestFairSharesHungryKeys(t *testing.T) {
	var st keyStates
	shares := map[string]float64{"a": 1, "b": 1}
	heavyRoundsSeen := 0
	for round := range 20 {
		// Two cores divided in proportion to the weights; in round 3
		// noise gives A half as much again as B.
		wa, wb := shares["a"], shares["b"]
		ua, ub := 2*wa/(wa+wb), 2*wb/(wa+wb)
		if round == 3 {
			ua, ub = 1.2, 0.8
		}
		shares, st = fairShares([]fairUse{{"a", "A", ua, 2}, {"b", "B", ub, 2}}, st)
		for _, h := range st.heavy {
			if h {
				heavyRoundsSeen++
			}
		}
	}
	if heavyRoundsSeen != releaseRounds {
		t.Errorf("a key was heavy in %d rounds, want %d (the noise's, then under the average until released)", heavyRoundsSeen, releaseRounds)
	}
	if shares["a"] != 1 || shares["b"] != 1 {
		t.Errorf("shares at the end %v, want equal", shares)
	}
}

// TestFairSharesHeavyAgain: a key that wants every core beside a light key
// is heavy while it takes more than the average; a burst of the light key
// that starves it for a round releases it, and it is heavy again after.
// (A released key once counted as released in every later round, so no
// key became heavy again.)
func TestFairSharesHeavyAgain(t *testing.T) {
	var st keyStates
	shares := map[string]float64{"a": 1, "b": 1}
	heavy := 0
	for round := range 20 {
		// Two cores; B wants 0.7 of them (2 in round 8), A all it can get:
		// B takes what it wants up to its part of the weights.
		wantB := 0.7
		if round == 8 {
			wantB = 2
		}
		ub := min(wantB, 2*shares["b"]/(shares["a"]+shares["b"]))
		ua := 2 - ub
		shares, st = fairShares([]fairUse{{"a", "A", ua, 2}, {"b", "B", ub, 2}}, st)
		if st.heavy["A"] {
			heavy++
		}
		if round == 19 && !st.heavy["A"] {
			t.Errorf("A, taking 1.3 of 2 cores beside B's 0.7, is not heavy at the end")
		}
		if st.heavy["B"] {
			t.Errorf("round %d: B, the light key, is heavy", round)
		}
	}
	if heavy < 16 {
		t.Errorf("A was heavy in %d of 20 rounds, want all but the first, the burst's and the one after", heavy)
	}
}

// TestFairSharesStalledLightKey: a round in which the light key used next
// to nothing (its commands waited behind the heavy key) keeps the heavy key
// heavy; once the heavy key is idle too it is light, after releaseRounds
// rounds.
func TestFairSharesStalledLightKey(t *testing.T) {
	st := keyStates{heavy: map[string]bool{"A": true}, busy: map[string]bool{"a": true}}
	_, st = fairShares([]fairUse{{"a", "A", 0.9, 2}, {"b", "B", 0.001, 2}}, st)
	if !st.heavy["A"] {
		t.Errorf("A, busy while B stalled, was released")
	}
	for round := 1; round <= releaseRounds; round++ {
		_, st = fairShares([]fairUse{{"a", "A", 0.001, 2}, {"b", "B", 0.001, 2}}, st)
		if h := st.heavy["A"]; h != (round < releaseRounds) {
			t.Errorf("idle round %d: A heavy %v, want %v", round, h, round < releaseRounds)
		}
	}
}

// TestCPUPlaces: while a key is heavy and others are present, the heavy
// keys' sandboxes run on the last cores (their part of the present keys',
// rounded down) and the others' on the rest; otherwise (or on one core, or
// when the heavy keys' part is under a core) every sandbox may run
// anywhere.
func TestCPUPlaces(t *testing.T) {
	use := []fairUse{{"a1", "A", 1, 1}, {"a2", "A", 1, 1}, {"b", "B", .4, 1}, {"c", "C", 0, 1}}
	all := func(n int) map[string]coreRange {
		return map[string]coreRange{"a1": {0, n}, "a2": {0, n}, "b": {0, n}, "c": {0, n}}
	}
	heavyA := map[string]bool{"A": true}
	cases := []struct {
		name  string
		heavy map[string]bool
		light int
		n     int
		want  map[string]coreRange
	}{
		{"no heavy key: anywhere", nil, 2, 2, all(2)},
		{"a heavy key alone: anywhere", heavyA, 0, 2, all(2)},
		{"one core: nothing to divide", heavyA, 1, 1, nil},
		{"two cores, one heavy key, one light", heavyA, 1, 2,
			map[string]coreRange{"a1": {1, 2}, "a2": {1, 2}, "b": {0, 1}, "c": {0, 1}}},
		{"two cores, one heavy key and two light: a core is more than its part, so anywhere", heavyA, 2, 2, all(2)},
		{"eight cores, one heavy key of four present: two", heavyA, 3, 8,
			map[string]coreRange{"a1": {6, 8}, "a2": {6, 8}, "b": {0, 6}, "c": {0, 6}}},
		{"seven cores, one heavy key of two present: three, rounded down", heavyA, 1, 7,
			map[string]coreRange{"a1": {4, 7}, "a2": {4, 7}, "b": {0, 4}, "c": {0, 4}}},
		{"four cores, two heavy keys of three", map[string]bool{"A": true, "B": true}, 1, 4,
			map[string]coreRange{"a1": {2, 4}, "a2": {2, 4}, "b": {2, 4}, "c": {0, 2}}},
		{"many light keys: the heavy key's part is under a core", heavyA, 20, 4, all(4)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := cpuPlaces(use, c.heavy, c.light, c.n)
			if len(got) != len(c.want) {
				t.Fatalf("places %v, want %v", got, c.want)
			}
			for id, w := range c.want {
				if got[id] != w {
					t.Errorf("sandbox %s: cores %v, want %v", id, got[id], w)
				}
			}
		})
	}
}

// TestLightPresent: a key counts as present for presentRounds rounds
// after it last used presentCores; heavy keys never count as light ones.
func TestLightPresent(t *testing.T) {
	var seen map[string]int
	for round := 1; round <= presentRounds+1; round++ {
		use := []fairUse{{"a", "A", 1, 1}, {"b", "B", .005, 1}}
		switch round {
		case 1:
			use = append(use, fairUse{"d", "D", .02, 1})
		case 2:
			use = append(use, fairUse{"c", "C", presentCores, 1})
		}
		seen = present(seen, use, round)
	}
	// Round presentRounds+1: A now, C seen presentRounds-1 rounds ago, D
	// presentRounds ago (forgotten), B never over presentCores.
	if n := lightPresent(seen, map[string]bool{"A": true}); n != 1 {
		t.Errorf("present light keys %d (seen %v), want 1: C", n, seen)
	}
	if n := lightPresent(seen, nil); n != 2 {
		t.Errorf("present keys %d (seen %v), want 2: A and C", n, seen)
	}
}
