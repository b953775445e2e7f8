package sandbox

import (
	"context"
	"fmt"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/store"
)

// startingGrace is how long a sandbox may sit in "starting" before a
// restarted server treats it as abandoned. Another process on the same data
// directory (a second CLI with an embedded server) may be creating it now.
const startingGrace = 2 * time.Minute

// Recover makes the host match the store after a (re)start:
//   - a running sandbox whose lease has ended is destroyed (lease_ended);
//   - a running sandbox whose lease runs on is re-attached and its lease
//     timer re-armed; if the driver no longer has it, it is marked failed;
//   - a sandbox stuck in "starting" past startingGrace is destroyed (failed);
//   - a sandbox the driver runs that no record knows is destroyed (orphan).
func (m *Manager) Recover(ctx context.Context) error {
	records, err := m.store.ListSandboxes(ctx, store.SandboxFilter{})
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	known := map[string]store.Sandbox{}
	for _, sb := range records {
		known[sb.ID] = sb
		m.recoverOne(ctx, sb)
	}
	ids, err := m.driver.List(ctx)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
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
	m.cleanupNetworks(ctx)
	return nil
}

func (m *Manager) recoverOne(ctx context.Context, sb store.Sandbox) {
	now := m.now()
	switch sb.State {
	case store.StateStopped:
		return
	case store.StateStarting:
		if now.Sub(sb.CreatedAt) > startingGrace {
			m.log.Info("destroying sandbox abandoned while starting", "sandbox", sb.ID)
			_ = m.stop(ctx, sb.ID, EndFailed)
		}
		return
	}
	m.mu.Lock()
	_, tracked := m.live[sb.ID]
	m.mu.Unlock()
	if tracked {
		return
	}
	if !sb.LeaseEndsAt.After(now) {
		m.log.Info("lease ended while the server was down", "sandbox", sb.ID)
		_ = m.stop(ctx, sb.ID, EndLeaseEnded)
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
