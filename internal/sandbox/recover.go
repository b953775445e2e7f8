package sandbox

import (
	"context"
	"fmt"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/store"
)

// Recover makes the host match the store after a (re)start. It must run
// before anything else creates sandboxes on this driver and store: the
// server calls it under the data directory's lock, so no other process is
// creating sandboxes there and every record still "starting" belongs to a
// process that died.
//   - a sandbox left "starting" is destroyed (failed): its create was
//     interrupted and its caller got no sandbox;
//   - a running sandbox whose lease has ended is destroyed (lease_ended),
//     recorded as ended at its lease end, when it was due to stop (and
//     billed up to then only), not at the restart;
//   - a running sandbox whose lease runs on is re-attached and its lease
//     timer re-armed; if the driver no longer has it, it is marked failed
//     (or out_of_memory);
//   - a paused sandbox is destroyed (retention) when its paused retention
//     ended, and otherwise made sure to run nothing (a pause or resume that
//     a dead server left half done) with its image kept (pause.go);
//   - a sandbox the driver runs that no record knows, or knows as stopped,
//     is destroyed (orphan);
//   - networks that no running or adopted sandbox owns are removed.
//
// The driver's list comes first: it waits for driver commands a crashed
// process left running (a boot half done), so that nothing appears after
// the reconciliation.
//
// With GateLeaderWork (several servers on one store) Recover only
// re-attaches the running sandboxes whose lease runs on: a record still
// "starting" may be another server's create under way, a sandbox with no
// record the leader's warm pool, and ended leases and retentions are the
// leader's sweep's (what a dead server left, the leader's reconciliation
// cleans up: reconcile.go).
func (m *Manager) Recover(ctx context.Context) error {
	if m.lead.gated {
		return m.recoverShared(ctx)
	}
	ids, err := m.driver.List(ctx)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	records, err := m.store.ListSandboxes(ctx, store.SandboxFilter{})
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	known := map[string]store.Sandbox{}
	for _, sb := range records {
		known[sb.ID] = sb
		m.recoverOne(ctx, sb)
	}
	for _, id := range ids {
		sb, ok := known[id]
		if ok && sb.State != store.StateStopped {
			continue
		}
		m.log.Info("destroying orphaned sandbox", "sandbox", id)
		if err := m.driver.Destroy(ctx, id); err != nil {
			m.log.Error("destroy orphan", "sandbox", id, "err", err)
		}
	}
	m.recoverSnapshots(ctx)
	m.recoverWarm(ctx)
	m.cleanupNetworks(ctx)
	m.recoverVolumes(ctx)
	return nil
}

func (m *Manager) recoverOne(ctx context.Context, sb store.Sandbox) {
	now := m.now()
	switch sb.State {
	case store.StateStopped:
		return
	case store.StateStarting:
		m.log.Warn("destroying a sandbox whose create the last server did not finish", "sandbox", sb.ID)
		if err := m.stop(ctx, sb.ID, EndFailed); err != nil {
			m.log.Error("destroy interrupted create", "sandbox", sb.ID, "err", err)
		}
		return
	case store.StatePaused:
		m.recoverPaused(ctx, sb)
		return
	}
	m.mu.Lock()
	_, tracked := m.live[sb.ID]
	m.mu.Unlock()
	if tracked {
		return
	}
	if !sb.LeaseEndsAt.After(now) {
		m.log.Info("lease ended while the server was down", "sandbox", sb.ID, "leaseEndedAt", sb.LeaseEndsAt)
		if err := m.stopAt(ctx, sb.ID, EndLeaseEnded, sb.LeaseEndsAt); err != nil {
			m.log.Error("stop at lease end", "sandbox", sb.ID, "err", err)
		}
		return
	}
	h, err := m.driver.Recover(ctx, sb.ID, sb.DriverState)
	if err != nil {
		reason := m.lostReason(ctx, sb.ID)
		m.log.Warn("sandbox lost while the server was down", "sandbox", sb.ID, "reason", reason, "err", err)
		_ = m.stop(ctx, sb.ID, reason)
		return
	}
	m.reattachNetwork(ctx, sb.ID)
	m.adopt(sb.ID, h, sb.LeaseEndsAt)
	m.log.Info("adopted running sandbox", "sandbox", sb.ID, "leaseEndsAt", sb.LeaseEndsAt)
}

// lostReason says why a sandbox that Recover could not re-attach ended:
// out of memory when the driver can tell, failed otherwise. A sandbox whose
// processes still run (its agent does not answer) is failed too.
func (m *Manager) lostReason(ctx context.Context, id string) string {
	w, ok := m.driver.(driver.Watcher)
	if !ok {
		return EndFailed
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if ex, err := w.Wait(ctx, id); err == nil && ex.OutOfMemory {
		return EndOutOfMemory
	}
	return EndFailed
}

// recoverShared is Recover with GateLeaderWork: re-attach the running
// sandboxes whose lease runs on, change nothing else (not even a sandbox it
// cannot reach: another server may well reach it).
func (m *Manager) recoverShared(ctx context.Context) error {
	records, err := m.store.ListSandboxes(ctx, store.SandboxFilter{State: store.StateRunning})
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	for _, sb := range records {
		if !sb.LeaseEndsAt.After(m.now()) {
			continue
		}
		// Not recoverOne: a sandbox this server cannot reach now is left
		// running (attach.go; the leader ends one that is really gone).
		if _, err := m.attached(ctx, sb); err != nil {
			m.log.Warn("could not attach at start; a request will try again", "sandbox", sb.ID, "err", err)
			continue
		}
		m.reattachNetwork(ctx, sb.ID)
	}
	m.cleanupNetworks(ctx)
	return nil
}
