package sandbox

import (
	"context"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/store"
)

// Leader-only work. Several servers may share one store (Kubernetes, serve
// --leader-election); then the work that mutates shared state on its own
// schedule must be done by one of them at a time, the leader:
//   - the metering sampler (ledger intervals) and the daily spending limits
//     it enforces (meter.go), and the ledger's compaction (compact.go);
//   - the warm pool's refill and retirement (pool.go);
//   - ending leases and paused retentions: the per-sandbox timers act only
//     while leading, and the leader sweeps the store for the leases and
//     retentions of every server's sandboxes (sweepLeases), and for
//     snapshots past their retention (snapretention.go);
//   - cleaning up what a dead server left: creates it never finished,
//     sandboxes with no record or a stopped one (reconcile.go).
//
// Everything a request does (create, exec, stop, pause, the ledger's first
// and last interval of a sandbox) runs on every server, leader or not.
// Without GateLeaderWork (a single server, the default) none of this
// applies: StartMetering and StartPool start their loops at once, timers
// act, and there is no sweep (but the snapshots' expiry loop).

// DefaultSweepInterval is how often the leader looks in the store for leases
// and paused retentions that have ended (the timers of the server that holds
// a sandbox end it on time when that server leads; the sweep ends the others
// at most this late).
const DefaultSweepInterval = time.Second

// leadState is the manager's leadership (zero value: not gated).
type leadState struct {
	// gated is set by GateLeaderWork: the leader-only loops run only inside
	// Lead, and timers act only while leading.
	gated bool
	// sweep is the lease sweep's period (DefaultSweepInterval).
	sweep time.Duration

	mu sync.Mutex
	// ctx is the current term's context (nil: not leading).
	ctx context.Context
	// done is closed when the current Lead returns.
	done chan struct{}
	// cancel ends the current term (Close).
	cancel context.CancelFunc
	// poolCfg is the pool Lead runs (StartPool; nil: none).
	poolCfg *PoolConfig
	// closed is set by Close: no Lead starts after it.
	closed bool
	// rec is the reconciliation of dead servers' leftovers (reconcile.go),
	// used by the sweep only.
	rec reconcileState
}

// GateLeaderWork makes the leader-only work (see above) run only inside
// Lead. Call it before StartMetering and StartPool, and then call Lead each
// time this server becomes the leader. sweep is the period of the lease
// sweep (0: DefaultSweepInterval).
func (m *Manager) GateLeaderWork(sweep time.Duration) {
	if sweep <= 0 {
		sweep = DefaultSweepInterval
	}
	m.lead.gated, m.lead.sweep = true, sweep
}

// Leading reports whether this manager does the leader-only work now:
// always true without GateLeaderWork, and while Lead runs with it.
func (m *Manager) Leading() bool {
	if !m.lead.gated {
		return true
	}
	m.lead.mu.Lock()
	defer m.lead.mu.Unlock()
	return m.lead.ctx != nil && m.lead.ctx.Err() == nil
}

// leaderContext is the context leader-only work runs under: the current
// term's (ok false when not leading) or, without gating, Background.
func (m *Manager) leaderContext() (context.Context, bool) {
	if !m.lead.gated {
		return context.Background(), true
	}
	m.lead.mu.Lock()
	defer m.lead.mu.Unlock()
	if m.lead.ctx == nil || m.lead.ctx.Err() != nil {
		return nil, false
	}
	return m.lead.ctx, true
}

// Lead runs the leader-only work — the metering sampler and spending
// limits, the warm pool, the lease and retention sweep — until ctx ends or
// the manager closes, and returns once all of it has stopped: no loop runs
// and no leader-only write is in flight (a stop that a lease end already
// began finishes: stops are idempotent). The warm pool's unclaimed
// sandboxes are destroyed before it returns. It does nothing without
// GateLeaderWork (the loops then run from StartMetering and StartPool) and
// returns at once when another Lead runs.
func (m *Manager) Lead(ctx context.Context) {
	if !m.lead.gated {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m.lead.mu.Lock()
	if m.lead.closed || m.lead.ctx != nil {
		m.lead.mu.Unlock()
		return
	}
	done := make(chan struct{})
	m.lead.ctx, m.lead.cancel, m.lead.done = ctx, cancel, done
	m.lead.rec.suspects, m.lead.rec.last = nil, time.Time{} // a new term looks afresh, at once
	poolCfg := m.lead.poolCfg
	m.lead.mu.Unlock()
	defer func() {
		m.lead.mu.Lock()
		m.lead.ctx, m.lead.cancel, m.lead.done = nil, nil, nil
		m.lead.mu.Unlock()
		close(done)
	}()
	m.log.Info("leading: starting the leader-only work")
	m.startMeterLoop(ctx)
	if poolCfg != nil {
		m.startPoolLoop(ctx, *poolCfg)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); m.sweepLeases(ctx) }()
	<-ctx.Done()
	wg.Wait()
	m.stopMetering()
	m.closePool()
	m.log.Info("not leading: the leader-only work has stopped")
}

// stopLead ends the current term, waits for Lead to return and lets no
// other start (Close).
func (m *Manager) stopLead() {
	m.lead.mu.Lock()
	m.lead.closed = true
	cancel, done := m.lead.cancel, m.lead.done
	m.lead.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// sweepLeases ends, every sweep period until ctx ends, the leases and the
// paused retentions that have ended, of every sandbox in the store (those
// other servers hold too).
func (m *Manager) sweepLeases(ctx context.Context) {
	t := time.NewTicker(m.lead.sweep)
	defer t.Stop()
	for {
		m.sweepOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepOnce ends what has ended now: running sandboxes past their lease
// end, paused ones past the paused retention.
func (m *Manager) sweepOnce(ctx context.Context) {
	now := m.now()
	running, err := m.store.ListSandboxes(ctx, store.SandboxFilter{State: store.StateRunning})
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("lease sweep", "err", err)
		}
		return
	}
	for _, sb := range running {
		if ctx.Err() != nil {
			return
		}
		if !sb.LeaseEndsAt.After(now) {
			m.endLease(ctx, sb.ID)
		}
	}
	paused, err := m.store.ListSandboxes(ctx, store.SandboxFilter{State: store.StatePaused})
	if err != nil {
		return
	}
	for _, sb := range paused {
		if ctx.Err() != nil {
			return
		}
		if sb.PausedAt != nil && !sb.PausedAt.Add(m.retention()).After(now) {
			m.endRetention(ctx, sb.ID)
		}
	}
	m.expireSnapshots(ctx)
	m.reconcileDue(ctx)
}
