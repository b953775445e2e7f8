package sandbox

import (
	"context"

	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// Several servers on one store (serve --leader-election): any server serves
// any sandbox. A request for a running sandbox this server does not hold
// (another server created it, or resumed it, after this one started)
// attaches to it on the spot: the driver's Recover from the record's
// driver state — the credentials this server's store keeps, never anything
// the sandbox says — and the sandbox is then held like one this server
// created (m.live is the cache: the next request finds it there). A
// sandbox whose record says stopped while this server still holds it
// (another server stopped it) is dropped from the cache on the next look
// (dropStale), so it is answered as stopped, never served from stale state.

// attached returns the held sandbox id whose record is sb (running),
// attaching to it first when this server does not hold it. Concurrent
// callers for one sandbox share one attach. Errors: errs.Conflict when the
// driver cannot reach it (the record is then re-read: a sandbox stopped
// meanwhile gets Running's error).
func (m *Manager) attached(ctx context.Context, sb store.Sandbox) (*liveSandbox, error) {
	id := sb.ID
	for {
		m.mu.Lock()
		if ls := m.live[id]; ls != nil {
			m.mu.Unlock()
			return ls, nil
		}
		if m.closed {
			m.mu.Unlock()
			return nil, errs.New(errs.Conflict, "sandbox %s: this server is shutting down; retry on another", id)
		}
		if wait, busy := m.attaching[id]; busy {
			m.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if m.attaching == nil {
			m.attaching = map[string]chan struct{}{}
		}
		done := make(chan struct{})
		m.attaching[id] = done
		m.mu.Unlock()
		err := m.attach(ctx, sb)
		m.mu.Lock()
		delete(m.attaching, id)
		m.mu.Unlock()
		close(done)
		if err != nil {
			return nil, err
		}
	}
}

// attach re-attaches sandbox sb through the driver and holds it. The driver
// checks that the sandbox is the one the record names (Kubernetes: the
// pod's name and UID) and that its agent proves the pinned identity
// stored at create. Its network policy is the cluster's already (the
// server that created or changed it applied it), so nothing is re-applied.
// A sandbox the driver cannot reach is not stopped here: it may be
// another server's network trouble, not the sandbox's; its holder's
// watcher or the leader's reconciliation (reconcile.go) ends a dead one.
func (m *Manager) attach(ctx context.Context, sb store.Sandbox) error {
	if sb.State != store.StateRunning || len(sb.DriverState) == 0 {
		_, err := m.Running(ctx, sb.ID)
		if err == nil {
			err = errs.New(errs.Conflict, "sandbox %s has no driver state to attach to yet; retry", sb.ID)
		}
		return err
	}
	h, err := m.driver.Recover(ctx, sb.ID, sb.DriverState)
	if err != nil {
		// Stopped meanwhile by the server that holds it: say so.
		if _, rerr := m.Running(ctx, sb.ID); rerr != nil {
			return rerr
		}
		return errs.New(errs.Conflict, "sandbox %s runs but this server cannot reach it (%v); retry", sb.ID, err)
	}
	// The record may have changed while the driver looked (a stop on
	// another server): hold only what is still running, with its lease
	// end as the record says now.
	cur, err := m.store.GetSandbox(ctx, sb.ID)
	if err != nil {
		return err
	}
	if cur.State != store.StateRunning {
		_, err := m.Running(ctx, sb.ID)
		return err
	}
	m.adopt(sb.ID, h, cur.LeaseEndsAt)
	m.log.Info("attached to a sandbox another server started", "sandbox", sb.ID)
	return nil
}

// dropStale forgets a sandbox this server holds whose record (sb) says it
// stopped (another server stopped it), unless a stop on this server is
// under way (which drops it itself): its lease timer, watcher and
// connections go, and requests waiting on it see it gone.
func (m *Manager) dropStale(sb store.Sandbox) {
	if sb.State != store.StateStopped {
		return
	}
	m.mu.Lock()
	ls := m.live[sb.ID]
	if ls == nil || m.stopping[sb.ID] != nil {
		m.mu.Unlock()
		return
	}
	delete(m.live, sb.ID)
	m.mu.Unlock()
	ls.release()
	ls.markGone()
	m.log.Info("dropped a sandbox another server stopped", "sandbox", sb.ID, "reason", sb.EndReason)
}

// heldOrAttach is usable followed by attached: the held sandbox id, when
// its record says it can be used.
func (m *Manager) heldOrAttach(ctx context.Context, id string) (store.Sandbox, *liveSandbox, error) {
	sb, err := m.usable(ctx, id)
	if err != nil {
		return sb, nil, err
	}
	ls, err := m.attached(ctx, sb)
	return sb, ls, err
}
