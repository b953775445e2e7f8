package sandbox

import (
	"context"
	"errors"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/store"
)

// The leader's reconciliation of what a dead server left (several servers
// on one store). A server that dies mid-create leaves a record "starting"
// and maybe a pod; one that dies mid-stop leaves a record "stopped" and its
// pod; a dead leader leaves its warm pool's pods, which have no record.
// Start-up recovery cannot clean these up when other servers run (the
// record may be another server's create under way), so the leader does,
// every ReconcileInterval, over a driver every server shares
// (driver.Shared: Kubernetes; a per-host driver's list is one host's):
//   - a record "starting" created more than OrphanGrace ago is failed and
//     what the driver has of it destroyed (the stop does both);
//   - a sandbox the driver has (a pod, or the secret or policy a destroy
//     cut short left) whose record says stopped, ended more than
//     min(OrphanGrace, a minute) ago, is destroyed (the stopping server's
//     own last sample and destroy, milliseconds and a second or so after
//     the record, come first when it lives; a second destroy is harmless);
//   - a sandbox the driver runs with no record, not in this leader's warm
//     pool, seen so by OrphanGrace of consecutive passes, is destroyed;
//   - a record "running" whose sandbox the driver no longer has (its pod
//     deleted, its node lost, while no server watched it) is stopped as
//     failed (out_of_memory when the driver can tell).
//
// Why the grace is safe: a create inserts its record ("starting") before it
// asks the driver for anything, and a live server's create of a sandbox
// ends (running, or failed and destroyed) within the driver's ready
// timeout (Kubernetes: 2 minutes by default), far below OrphanGrace (10
// minutes): a "starting" record older than that has no live creator. Were
// it to finish after all, MarkRunning finds the record no longer
// "starting" and that create destroys its sandbox itself. A sandbox with no
// record is a warm pool's (only a leader boots them, and this leader's
// ready ones are skipped) or a claim between the pool and its record
// (milliseconds): one that has had no record for OrphanGrace belongs to no
// live server. The clocks of the servers need to agree to well within the
// grace (CreatedAt is the creating server's clock).

// Reconcile defaults.
const (
	DefaultReconcileInterval = 30 * time.Second
	DefaultOrphanGrace       = 10 * time.Minute
	// stoppedGrace is the longest the leader leaves a stopped record's
	// sandbox to the server that stopped it (at most the orphan grace).
	stoppedGrace = time.Minute
)

// reconcileState is the leader's reconciliation settings and memory.
type reconcileState struct {
	interval time.Duration
	grace    time.Duration
	// suspects maps sandboxes the driver runs with no record to when this
	// term first saw them so (reset at each term).
	suspects map[string]time.Time
	last     time.Time
}

// SetReconcile sets how often the leader reconciles (interval) and how old
// a record "starting", or a sandbox without a record, must be before it is
// taken for a dead server's leftover (grace); 0 keeps a default
// (DefaultReconcileInterval, or grace when shorter; DefaultOrphanGrace). grace must exceed the
// longest create (the driver's ready timeout): see above. Call it before
// Lead.
func (m *Manager) SetReconcile(interval, grace time.Duration) {
	if interval > 0 {
		m.lead.rec.interval = interval
	}
	if grace > 0 {
		m.lead.rec.grace = grace
	}
}

// reconcileDue runs reconcileOnce when the interval has passed since the
// last (called by the sweep, on the leader only).
func (m *Manager) reconcileDue(ctx context.Context) {
	r := &m.lead.rec
	if r.grace == 0 {
		r.grace = DefaultOrphanGrace
	}
	if r.interval == 0 {
		r.interval = min(DefaultReconcileInterval, r.grace)
	}
	if _, ok := m.driver.(driver.Shared); !ok {
		return // a per-host driver: another host's sandboxes would look orphaned
	}
	if now := m.now(); now.Sub(r.last) >= r.interval {
		r.last = now
		m.reconcileOnce(ctx)
	}
}

// reconcileOnce is one pass (see above).
func (m *Manager) reconcileOnce(ctx context.Context) {
	r := &m.lead.rec
	now := m.now()
	starting, err := m.store.ListSandboxes(ctx, store.SandboxFilter{State: store.StateStarting})
	if err != nil {
		m.log.Warn("reconcile", "err", err)
		return
	}
	for _, sb := range starting {
		if ctx.Err() != nil {
			return
		}
		if now.Sub(sb.CreatedAt) < r.grace || m.isCreating(sb.ID) {
			continue
		}
		m.log.Warn("failing a create no live server finishes", "sandbox", sb.ID, "createdAt", sb.CreatedAt)
		if err := m.stop(ctx, sb.ID, EndFailed); err != nil {
			m.log.Error("fail interrupted create", "sandbox", sb.ID, "err", err)
		}
	}
	// Records first: a record running now had its sandbox before (a create
	// marks it running only once the driver made it), so one the driver's
	// list, taken after, does not have is gone.
	running, err := m.store.ListSandboxes(ctx, store.SandboxFilter{State: store.StateRunning})
	if err != nil {
		m.log.Warn("reconcile", "err", err)
		return
	}
	ids, err := m.driver.List(ctx)
	if err != nil {
		m.log.Warn("reconcile", "err", err)
		return
	}
	m.endVanished(ctx, running, ids)
	pooled := m.pooledIDs()
	seen := map[string]time.Time{}
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		if pooled[id] {
			continue
		}
		sb, err := m.store.GetSandbox(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			first, ok := r.suspects[id]
			if !ok {
				first = now
			}
			seen[id] = first
			if now.Sub(first) < r.grace {
				continue
			}
		case err != nil:
			m.log.Warn("reconcile", "sandbox", id, "err", err)
			continue
		case sb.State == store.StateStopped && sb.EndedAt != nil && now.Sub(*sb.EndedAt) >= min(stoppedGrace, r.grace):
		default:
			continue
		}
		m.log.Info("destroying a sandbox a dead server left", "sandbox", id, "recorded", err == nil)
		if err := m.driver.Destroy(ctx, id); err != nil {
			m.log.Error("destroy leftover", "sandbox", id, "err", err)
			continue
		}
		delete(seen, id)
	}
	r.suspects = seen
}

// endVanished stops (failed, or out of memory when the driver can tell)
// the running sandboxes whose record says running and that the driver no
// longer has: their pod was deleted or their node lost while no server
// held them, and nothing else would end them before their lease.
func (m *Manager) endVanished(ctx context.Context, running []store.Sandbox, ids []string) {
	have := make(map[string]bool, len(ids))
	for _, id := range ids {
		have[id] = true
	}
	for _, sb := range running {
		if have[sb.ID] || ctx.Err() != nil {
			continue
		}
		reason := m.lostReason(ctx, sb.ID)
		m.log.Warn("a running sandbox's pod is gone; stopping it", "sandbox", sb.ID, "reason", reason)
		if err := m.stop(ctx, sb.ID, reason); err != nil {
			m.log.Error("stop vanished sandbox", "sandbox", sb.ID, "err", err)
		}
	}
}

// pooledIDs are the warm pool's ready sandboxes (this server's).
func (m *Manager) pooledIDs() map[string]bool {
	out := map[string]bool{}
	p := m.currentPool()
	if p == nil {
		return out
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, list := range p.ready {
		for _, ps := range list {
			out[ps.id] = true
		}
	}
	return out
}

// isCreating reports whether this server is creating sandbox id now.
func (m *Manager) isCreating(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.creating[id]
}
