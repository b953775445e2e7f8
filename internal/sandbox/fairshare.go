package sandbox

import (
	"context"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/store"
)

// Fair CPU between keys (issue 25). The host gives contended cores to
// sandboxes in proportion to their CPU weights (cgroup cpu.shares). Every
// FairShareInterval the manager measures the host CPU each running
// sandbox it holds used since the last round, and sets their weights and
// the cores they may run on:
//
//   - A key's busy sandboxes (those that used at least busyShare of their
//     vCPUs) split one sandbox's weight: each gets 1/n of it. A key running
//     two busy loops on a 2-core host took two thirds of it from a key
//     running one.
//   - A heavy key — one that used clearly more CPU than the average key
//     with work in the last round (heavyOver of it) — gets heavyShare of
//     that weight, until it has used under releaseUnder of the average
//     for releaseRounds rounds, so that the light keys' threads run first
//     when they wake. A round in which a heavy key used no more than the
//     average was measured at its low weight, and one in which a key's
//     busy sandboxes came to split its weight differently at the old
//     split: neither makes a key heavy. A heavy key stays heavy through a
//     round in which it alone used CPU (the light key's commands may have
//     waited behind it all round). Two keys that both want every core use
//     about as much each, and their weights do not flip back and forth.
//   - While a key is heavy and another used CPU in the last presentRounds
//     rounds, the heavy keys' sandboxes run on their part of the host's
//     cores (cpuPlaces) and the others' on the rest. Weights divide CPU
//     time, not waits: a command costs its sandbox ~30 ms of CPU over
//     ~900 wake-ups of gVisor's threads, and a woken thread that finds
//     the heavy key's thread on its core waits for it whatever the
//     weights — EEVDF lets the running thread finish its slice (1.4 ms
//     here), and this host's kernel does not preempt kernel work
//     (preempt=none). Two busy loops of one key beside another key's
//     commands: that key's exec p99 2.15-2.27x its quiet p99 by weights
//     alone, 1.02-2.17x (median 1.72x) on separate cores. The price is the heavy key's:
//     it keeps to its part of the cores while the others leave theirs
//     idle, for at most presentRounds rounds after their last command.
//   - While the cores are divided, sandboxes boot on the heavy keys' part
//     (driver.CPUPlacer's BootCPUs), a light key's too, until a round
//     places them. A boot is ~0.3 CPU-seconds that nobody waits on
//     thread by thread; booted on its own key's cores it took them from
//     that key's running sandboxes (a key creating sandboxes beside its
//     commands wanted 1.2-1.35 cores on this 2-core host, more than its
//     one), while on the heavy keys' cores it runs first, at their low
//     weight.
//
// Stronger penalties (yielding at once with cgroup cpu.idle, a CFS quota,
// a batch weight, 100 us slices, confining only the heavy key) were
// measured and not kept; the figures are in docs/ARCHITECTURE.md (host
// CPU). A key's idle sandboxes cost the others nothing, and a key alone
// on the host gets every core its sandboxes' CPU limits allow.

// FairShareInterval is how often the CPU weights are rebalanced.
const FairShareInterval = time.Second

const (
	// busyShare is the part of its vCPUs a sandbox must have used over the
	// last round to count as busy.
	busyShare = 0.25
	// activeCores is the CPU (in host cores) a key must have used over
	// the last round to count in the average that makes keys heavy.
	activeCores = 0.1
	// heavyOver: a key becomes heavy when its CPU over a round was over
	// heavyOver times the average of the active keys (with two keys: over
	// 1.22 times the other one's), and stays heavy while it is over the
	// average.
	heavyOver = 1.1
	// heavyMargin is the least CPU, in host cores, over the average that
	// counts towards heavy: noise on small figures makes none.
	heavyMargin = 0.05
	// heavyShare is a heavy key's weight, as a part of a light key's.
	heavyShare = 1.0 / 16
	// releaseRounds is how many rounds in a row a heavy key must use no
	// more than releaseUnder of the average (or, when it is the only key
	// with work, less than activeCores) to be light again. One was too
	// few: a light key's burst (a create) starved the heavy key for a
	// round, released it, and the light key, measured beside the starved
	// one, was made heavy in its place (TestNoisyNeighbours saw a 1 s exec
	// that way). Two were too few for a key whose demand comes in bursts
	// (A's 60 MB bodies wait on the server): held on its cores it dipped
	// for two rounds, was released, ran everywhere at full weight for a
	// round and was made heavy again; per-round logs of TestNoisyNeighbours
	// showed that in the middle of the attacks in each of 4 runs, with the
	// run's slowest exec (281, 392 ms) in that round in two. With four: in
	// 1 of 9 runs.
	releaseRounds = 4
	// releaseUnder: a heavy key counts towards its release only in rounds
	// it used under this part of the average. Held on its part of the
	// cores (cpuPlaces), a key that wants them all uses about what the
	// others do; released at the average, it was everywhere at full
	// weight again for a round every few seconds (TestNoisyNeighbours:
	// the attacker used 0.5-1.0 core beside the other key's 0.4-0.9).
	releaseUnder = 0.75
	// presentCores is the least CPU, in host cores, a key must have used
	// in a round to count as present (an idle sandbox uses ~0.0003 cores;
	// one exec of `true` ~0.03 core-seconds).
	presentCores = 0.01
	// presentRounds is how long a light key counts as present after it
	// last used presentCores: a key whose commands come every few seconds
	// (an agent's tool calls) is present between them, and a heavy key
	// has every core again this long after the others' last command.
	presentRounds = 10
)

// StartFairShare starts rebalancing CPU weights every interval (0 means
// FairShareInterval; negative: never) until Close, when the driver can both
// measure a sandbox's CPU and set its weight.
func (m *Manager) StartFairShare(interval time.Duration) {
	w, ok := m.driver.(driver.CPUWeighter)
	sr, ok2 := m.driver.(driver.StatsReader)
	if !ok || !ok2 || interval < 0 {
		return
	}
	if interval == 0 {
		interval = FairShareInterval
	}
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var st fairState
		for {
			select {
			case <-m.closing:
				return
			case <-t.C:
			}
			m.balanceCPU(ctx, w, sr, &st)
		}
	}()
}

// fairState is what one round of balanceCPU leaves for the next.
type fairState struct {
	last  map[string]cpuAt // each sandbox's CPU at the last round
	keys  keyStates        // the keys' states after the last round
	round int              // rounds since the state was empty
	seen  map[string]int   // the last round each key used presentCores
}

// keyStates are the fair-share states after a round: heavy holds the keys
// weighted down (only those), under how many rounds in a row each of them
// has used no more than the average, busy the sandboxes counted busy.
type keyStates struct {
	heavy map[string]bool
	under map[string]int
	busy  map[string]bool
}

// cpuAt is a sandbox's cumulative host CPU seconds at a time.
type cpuAt struct {
	cpu float64
	at  time.Time
}

// fairUse is one sandbox's CPU over the last round.
type fairUse struct {
	id, key string
	cores   float64 // host cores used on average over the round
	vcpus   float64 // its CPU limit
}

// fairShares is the policy of one round: each sandbox's share of the
// default weight and the keys' states now, from the sandboxes' use over the
// last round and the keys' states then.
func fairShares(use []fairUse, before keyStates) (map[string]float64, keyStates) {
	now := keyStates{heavy: map[string]bool{}, under: map[string]int{}, busy: map[string]bool{}}
	busy, busyBefore := map[string]int{}, map[string]int{}
	byKey := useByKey(use)
	for _, u := range use {
		// A heavy key's sandboxes ran at a sixteenth of the weight: one
		// that was busy stays busy, whatever the others left it.
		if u.vcpus > 0 && u.cores/u.vcpus >= busyShare || before.heavy[u.key] && before.busy[u.id] {
			busy[u.key]++
			now.busy[u.id] = true
		}
		if before.busy[u.id] {
			busyBefore[u.key]++
		}
	}
	// A round in which a key's busy sandboxes came to split its weight
	// differently was measured at the old split (two busy loops at a
	// whole weight each, where they now get half): it makes nobody heavy.
	resplit := false
	for k := range byKey {
		if max(1, busy[k]) != max(1, busyBefore[k]) {
			resplit = true
		}
	}
	var sum float64
	active := 0
	for _, c := range byKey {
		if c >= activeCores {
			sum += c
			active++
		}
	}
	if active >= 2 {
		avg := sum / float64(active)
		starved := false
		for k := range before.heavy {
			switch n := before.under[k] + 1; {
			case byKey[k] > avg:
				now.heavy[k] = true
			case byKey[k] > releaseUnder*avg:
				// Held where it is: not under enough to count down.
				now.heavy[k], starved = true, true
			case n < releaseRounds:
				now.heavy[k], now.under[k], starved = true, n, true
			default:
				starved = true // released
			}
		}
		// A round in which a heavy key used no more than the average was
		// measured at its low weight: the others' use then says what it
		// left them, not what they take at equal weights, so it makes
		// nobody heavy.
		for k, c := range byKey {
			if !starved && !resplit && !before.heavy[k] && c > heavyOver*avg && c-avg >= heavyMargin {
				now.heavy[k] = true
			}
		}
	} else {
		// One key (or none) used CPU this round. A heavy key that still
		// used some stays heavy: the others may have used next to nothing
		// only because their commands waited behind it the whole round,
		// and releasing it then made the wait longer. Its low weight costs
		// it nothing while no other key wants the cores.
		for k := range before.heavy {
			switch n := before.under[k] + 1; {
			case byKey[k] >= activeCores:
				now.heavy[k], now.under[k] = true, before.under[k]
			case n < releaseRounds:
				now.heavy[k], now.under[k] = true, n
			}
		}
	}
	shares := make(map[string]float64, len(use))
	for _, u := range use {
		s := 1 / float64(max(1, busy[u.key]))
		if now.heavy[u.key] {
			s *= heavyShare
		}
		shares[u.id] = s
	}
	return shares, now
}

// coreRange is host cores from..to-1 of those the server may use.
type coreRange struct{ from, to int }

// cpuPlaces is where each sandbox may run this round on a host of n cores,
// given the heavy keys and how many light keys are present. While a key is
// heavy and others are present, the heavy keys' sandboxes run on the last
// k cores and every other sandbox on the rest, k being the heavy keys'
// count's part of the present keys' cores rounded down: the light keys
// together never get fewer cores than their fair part, and the heavy keys
// no more than theirs. When that is no core (two cores, three keys), or
// no key is heavy, or no other is present, every sandbox may run
// anywhere. Nil when there is nothing to divide (one core).
func cpuPlaces(use []fairUse, heavy map[string]bool, lightPresent, n int) map[string]coreRange {
	if n < 2 {
		return nil
	}
	places := make(map[string]coreRange, len(use))
	k := heavyCores(len(heavy), lightPresent, n)
	for _, u := range use {
		switch {
		case k == 0:
			places[u.id] = coreRange{0, n}
		case heavy[u.key]:
			places[u.id] = coreRange{n - k, n}
		default:
			places[u.id] = coreRange{0, n - k}
		}
	}
	return places
}

// heavyCores is how many of n host cores (the last ones) h heavy keys'
// sandboxes run on beside lightPresent present light keys: the heavy keys'
// part of the cores, rounded down, at most n-1; 0 when nothing is divided.
func heavyCores(h, lightPresent, n int) int {
	if n < 2 || h == 0 || lightPresent == 0 {
		return 0
	}
	return min(n*h/(h+lightPresent), n-1)
}

// present updates seen, the last round each present key used presentCores,
// with this round's use, and forgets the keys not seen for presentRounds.
func present(seen map[string]int, use []fairUse, round int) map[string]int {
	if seen == nil {
		seen = map[string]int{}
	}
	for k, c := range useByKey(use) {
		if c >= presentCores {
			seen[k] = round
		}
	}
	for k, r := range seen {
		if round-r >= presentRounds {
			delete(seen, k)
		}
	}
	return seen
}

// lightPresent counts the present keys (present's) that are not heavy.
func lightPresent(seen map[string]int, heavy map[string]bool) int {
	n := 0
	for k := range seen {
		if !heavy[k] {
			n++
		}
	}
	return n
}

// useByKey sums the sandboxes' use by key, in host cores.
func useByKey(use []fairUse) map[string]float64 {
	byKey := map[string]float64{}
	for _, u := range use {
		byKey[u.key] += u.cores
	}
	return byKey
}

// balanceCPU is one round: it measures the running sandboxes this server
// holds against their figures of the last round, and writes their weights
// and, where the driver can place them, the cores they may run on.
func (m *Manager) balanceCPU(ctx context.Context, w driver.CPUWeighter, sr driver.StatsReader, st *fairState) {
	m.mu.Lock()
	held := make(map[string]bool, len(m.live))
	for id := range m.live {
		held[id] = true
	}
	m.mu.Unlock()
	if len(held) == 0 {
		*st = fairState{}
		if p, ok := w.(driver.CPUPlacer); ok {
			p.BootCPUs(0, p.HostCPUs())
		}
		return
	}
	sbs, err := m.store.ListSandboxes(ctx, store.SandboxFilter{State: store.StateRunning})
	if err != nil {
		m.log.Warn("fair share: list sandboxes", "err", err)
		return
	}
	now := map[string]cpuAt{}
	var use []fairUse
	for _, sb := range sbs {
		if !held[sb.ID] {
			continue
		}
		s, err := sr.Stats(ctx, sb.ID)
		if err != nil {
			continue
		}
		now[sb.ID] = cpuAt{cpu: s.CPUSeconds, at: s.At}
		u := fairUse{id: sb.ID, key: sb.KeyID, vcpus: sb.CPU}
		if p, ok := st.last[sb.ID]; ok {
			if secs := s.At.Sub(p.at).Seconds(); secs > 0 {
				u.cores = max(0, s.CPUSeconds-p.cpu) / secs
			}
		}
		use = append(use, u)
	}
	shares, keys := fairShares(use, st.keys)
	st.round++
	st.seen = present(st.seen, use, st.round)
	// Written every round, changed or not: a resume or a claim resets a
	// sandbox's weight behind this loop's back.
	for id, share := range shares {
		if err := w.SetCPUWeight(ctx, id, share); err != nil {
			// Gone since it was listed, most likely; the next round sees.
			m.log.Debug("fair share: set weight", "sandbox", id, "err", err)
		}
	}
	if p, ok := w.(driver.CPUPlacer); ok {
		// Boots go where the heavy keys run (see the top of this file).
		n, light := p.HostCPUs(), lightPresent(st.seen, keys.heavy)
		if k := heavyCores(len(keys.heavy), light, n); k > 0 {
			p.BootCPUs(n-k, n)
		} else {
			p.BootCPUs(0, n)
		}
		for id, c := range cpuPlaces(use, keys.heavy, light, n) {
			if err := p.PlaceCPU(ctx, id, c.from, c.to); err != nil {
				m.log.Debug("fair share: place cpu", "sandbox", id, "err", err)
			}
		}
	}
	st.last, st.keys = now, keys
}
