package sandbox

import (
	"context"
	"slices"
	"sync"

	"withruntime.dev/runtime/internal/store"
)

// meterBatch is how many sandboxes the periodic sampler samples together:
// their records and cursors in one query each, their intervals written in
// one transaction. Measured with bench/scale (200 idle sandboxes): one
// sample at a time, four at once, cost the server most of its idle CPU (four
// statements and a transaction per sandbox, every interval) and, every
// interval, a burst that held both cores of the host for tens of ms and
// delayed GET /v1/health by as much.
const meterBatch = 64

// sampleAll samples every running and paused sandbox, meterBatch at a
// time, one batch after another: those this server holds, and with
// GateLeaderWork (the leader samples for every server) those the store has
// running or paused.
func (m *Manager) sampleAll(ctx context.Context) {
	m.mu.Lock()
	held := make(map[string]bool, len(m.live)+len(m.paused))
	for id := range m.live {
		held[id] = true
	}
	for id := range m.paused {
		held[id] = true
	}
	m.mu.Unlock()
	seen := make(map[string]bool, len(held))
	ids := make([]string, 0, len(held))
	for id := range held {
		seen[id] = true
		ids = append(ids, id)
	}
	if m.lead.gated {
		for _, id := range m.sharedIDs(ctx) {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	for len(ids) > 0 && ctx.Err() == nil {
		n := min(len(ids), meterBatch)
		m.sampleBatch(ctx, ids[:n], held)
		ids = ids[n:]
	}
	if m.lead.gated {
		// Forget the locks of sandboxes that ended on other servers (a
		// lock dropped while in use costs nothing: the store's cursor
		// still writes each interval once).
		m.meter.mu.Lock()
		for id := range m.meter.locks {
			if !seen[id] {
				delete(m.meter.locks, id)
			}
		}
		m.meter.mu.Unlock()
	}
}

// sampleBatch takes the periodic sample of the sandboxes ids (sorted), as
// sample(ctx, id, false) would for each, holding their meter locks (taken
// in order, so two batches cannot deadlock; every other sampler takes one
// lock at a time). A sandbox of another server (not in held) is sampled
// once its creator opened its ledger (meterStart), so that the CPU of its
// boot is not billed; one of this server's with no ledger yet is left to
// sample, which opens it.
func (m *Manager) sampleBatch(ctx context.Context, ids []string, held map[string]bool) {
	locks := make([]*sync.Mutex, len(ids))
	for i, id := range ids {
		locks[i] = m.meterLock(id)
		locks[i].Lock()
	}
	var alone []string
	func() {
		defer func() {
			for _, l := range locks {
				l.Unlock()
			}
		}()
		alone = m.sampleLocked(ctx, ids, held)
	}()
	for _, id := range alone {
		if err := m.sample(ctx, id, false); err != nil && ctx.Err() == nil {
			m.log.Warn("metering", "sandbox", id, "err", err)
		}
	}
}

// sampleLocked is sampleBatch's work under the locks. It returns the
// sandboxes to sample one by one.
func (m *Manager) sampleLocked(ctx context.Context, ids []string, held map[string]bool) (alone []string) {
	fail := func(n int, err error) {
		for range n {
			m.observeSample("error")
		}
		if ctx.Err() == nil {
			m.log.Warn("metering", "sandboxes", len(ids), "err", err)
		}
	}
	curs, err := m.store.GetUsageCursors(ctx, ids)
	if err != nil {
		fail(len(ids), err)
		return nil
	}
	sbs, err := m.store.GetSandboxes(ctx, ids)
	if err != nil {
		fail(len(ids), err)
		return nil
	}
	recs := make([]store.UsageRecord, 0, len(ids))
	for _, id := range ids {
		cur, ok := curs[id]
		switch {
		case !ok && held[id]:
			alone = append(alone, id)
			continue
		case !ok:
			continue
		}
		sb, ok := sbs[id]
		if !ok {
			m.observeSample("error")
			continue
		}
		if cur.Closed {
			m.observeSample("skipped")
			continue
		}
		rec, write, err := m.nextInterval(ctx, sb, cur, false)
		switch {
		case err != nil:
			m.observeSample("error")
			if ctx.Err() == nil {
				m.log.Warn("metering", "sandbox", id, "err", err)
			}
		case !write:
			m.observeSample("skipped")
		default:
			recs = append(recs, rec)
		}
	}
	written, err := m.store.RecordUsageBatch(ctx, recs)
	if err != nil {
		fail(len(recs), err)
		return alone
	}
	for _, w := range written {
		if w {
			m.observeSample("written")
		} else {
			m.observeSample("skipped")
		}
	}
	return alone
}
