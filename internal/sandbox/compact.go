package sandbox

import (
	"context"
	"time"
)

// The ledger's compaction (store.CompactUsage). The sampler writes one row
// per sandbox every Interval; once a row is an hour old, nobody needs it at
// that detail (spending limits read today, reports and costs sum whole
// sandboxes or windows), so the leader merges it with the rest of its
// sandbox's UTC hour. It runs beside the sampler, on the same term: one
// loop per manager, so never two compactions at once from one server (and
// the store serializes those of two servers).
const (
	// compactEvery is the time between two compactions.
	compactEvery = 10 * time.Minute
	// compactKeep is how much recent usage keeps the sampler's detail.
	compactKeep = time.Hour
	// defaultCompactPause is the rest between two calls of one
	// compaction. Each call merges at most 5 minutes of intervals (see
	// store.CompactUsage: a bounded transaction); a store whose ledger was
	// never compacted takes many calls, and the pause lets the sampler's
	// writes in between them.
	defaultCompactPause = time.Second
)

// compactLoop compacts the ledger every compactEvery until ctx ends, then
// closes done.
func (m *Manager) compactLoop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(compactEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.compactUsage(ctx)
	}
}

// compactUsage merges the ledger's intervals older than compactKeep, one
// bounded call after another until nothing is left (or ctx ends). An error
// is logged; the next round tries again.
func (m *Manager) compactUsage(ctx context.Context) {
	before := m.now().Add(-compactKeep) // fixed for the round: the calls converge
	for {
		n, err := m.store.CompactUsage(ctx, before)
		if err != nil {
			if ctx.Err() == nil {
				m.log.Error("metering: compact usage", "before", before, "err", err)
			}
			return
		}
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(m.meter.compactPause):
		}
	}
}
