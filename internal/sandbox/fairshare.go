package sandbox

import (
	"context"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/store"
)

// Fair CPU between keys (issue 25). The host gives contended cores to
// sandboxes in proportion to their CPU weights, and every sandbox has the
// same weight: a key running two busy sandboxes on a 2-core host took two
// thirds of it from a key running one, and the other key's execs waited
// (p99 2.6 times its quiet one). So every FairShareInterval the manager
// counts each key's busy sandboxes on this server — those that used at
// least busyShare of their vCPUs since the last round — and gives each of
// the key's running sandboxes 1/n of a sandbox's weight: under contention
// every key with work gets the same share of the host, however many
// sandboxes it runs, and a key's idle sandboxes cost the others nothing.
// Weights only divide contended CPU: a key alone on the host still gets
// every core its sandboxes' CPU limits allow.

// FairShareInterval is how often the CPU weights are rebalanced.
const FairShareInterval = 2 * time.Second

// busyShare is the part of its vCPUs a sandbox must have used over the last
// round to count as busy.
const busyShare = 0.25

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
		last := map[string]cpuAt{}
		for {
			select {
			case <-m.closing:
				return
			case <-t.C:
			}
			last = m.balanceCPU(ctx, w, sr, last)
		}
	}()
}

// cpuAt is a sandbox's cumulative host CPU seconds at a time.
type cpuAt struct {
	cpu float64
	at  time.Time
}

// balanceCPU is one round: it measures the running sandboxes this server
// holds against their figures of the last round, and writes each one's
// weight. It returns this round's figures.
func (m *Manager) balanceCPU(ctx context.Context, w driver.CPUWeighter, sr driver.StatsReader, last map[string]cpuAt) map[string]cpuAt {
	m.mu.Lock()
	held := make(map[string]bool, len(m.live))
	for id := range m.live {
		held[id] = true
	}
	m.mu.Unlock()
	if len(held) == 0 {
		return nil
	}
	sbs, err := m.store.ListSandboxes(ctx, store.SandboxFilter{State: store.StateRunning})
	if err != nil {
		m.log.Warn("fair share: list sandboxes", "err", err)
		return last
	}
	now := map[string]cpuAt{}
	busy := map[string]int{}
	var mine []store.Sandbox
	for _, sb := range sbs {
		if !held[sb.ID] {
			continue
		}
		st, err := sr.Stats(ctx, sb.ID)
		if err != nil {
			continue
		}
		mine = append(mine, sb)
		now[sb.ID] = cpuAt{cpu: st.CPUSeconds, at: st.At}
		p, ok := last[sb.ID]
		if secs := st.At.Sub(p.at).Seconds(); ok && secs > 0 && sb.CPU > 0 &&
			(st.CPUSeconds-p.cpu)/(secs*sb.CPU) >= busyShare {
			busy[sb.KeyID]++
		}
	}
	for _, sb := range mine {
		share := 1 / float64(max(1, busy[sb.KeyID]))
		if err := w.SetCPUWeight(ctx, sb.ID, share); err != nil {
			// Gone since it was listed, most likely; the next round sees.
			m.log.Debug("fair share: set weight", "sandbox", sb.ID, "err", err)
		}
	}
	return now
}
