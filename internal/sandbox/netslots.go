package sandbox

import (
	"context"
	"slices"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/egress"
)

// DefaultNetworkSlots is `withruntime serve`'s default
// PoolConfig.NetworkSlots.
const DefaultNetworkSlots = 8

// netSlots holds sandbox networks prepared ahead of the creates that take
// them: namespace, veth, listeners and nftables rules made (egress.Attach)
// under the id of the sandbox that will take the slot, with a policy that
// allows nothing. A create then only sets its policy on its slot.
//
// A slot is made for one sandbox and never used by another: the namespace
// a sandbox ran in is deleted with it, so nothing a sandbox did to its
// network reaches a later tenant. A slot has no store record, so a server
// that starts after one died removes any slot it left (cleanupNetworks
// keeps the networks of running records only); Close removes the slots
// still waiting.
//
// The networks of stopped sandboxes are removed in the background
// (detachLater), off the delete's path; Close waits until they are gone.
type netSlots struct {
	size   int
	mu     sync.Mutex
	ready  []string // ids whose network is attached and waits, oldest first
	closed bool
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	// detaching counts background detaches (detachLater); idle is
	// signalled (with mu) when it drops to zero.
	detaching int
	idle      *sync.Cond
	// serial runs the background detaches one at a time: concurrent ones
	// only contend for the kernel's network configuration lock.
	serial sync.Mutex
}

func newNetSlots() *netSlots {
	s := &netSlots{}
	s.idle = sync.NewCond(&s.mu)
	return s
}

// waitDetached waits until no background detach is under way.
func (s *netSlots) waitDetached() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.detaching > 0 {
		s.idle.Wait()
	}
}

// startNetSlots starts keeping size networks prepared (0 or less: none;
// networks are still detached in the background). Call it after Recover,
// which removes the slots an earlier process left.
func (m *Manager) startNetSlots(size int) {
	if m.network == nil {
		return
	}
	s := m.network.slots
	s.mu.Lock()
	defer s.mu.Unlock()
	if size <= 0 || s.closed || s.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.size, s.cancel, s.done, s.wake = size, cancel, make(chan struct{}), make(chan struct{}, 1)
	go m.keepNetSlots(ctx, s)
}

// keepNetSlots prepares slots until size wait, then waits for a take.
func (m *Manager) keepNetSlots(ctx context.Context, s *netSlots) {
	defer close(s.done)
	for ctx.Err() == nil {
		s.mu.Lock()
		n := len(s.ready)
		s.mu.Unlock()
		if n < s.size {
			id := newID()
			if _, err := m.network.egress.Attach(ctx, id, egress.Policy{}); err != nil {
				if ctx.Err() != nil {
					return
				}
				m.log.Warn("network slots: preparing a network failed; retrying", "err", err, "in", poolRetry)
				m.detachNetwork(context.WithoutCancel(ctx), id)
				select {
				case <-ctx.Done():
				case <-time.After(poolRetry):
				}
				continue
			}
			s.mu.Lock()
			s.ready = append(s.ready, id)
			s.mu.Unlock()
			continue
		}
		select {
		case <-ctx.Done():
		case <-s.wake:
		}
	}
}

// takeNetSlot returns the id of a prepared network (policy: nothing
// allowed), for the sandbox that takes it to use as its own id, or "" when
// none waits. Each slot is handed out once.
func (m *Manager) takeNetSlot() string {
	if m.network == nil {
		return ""
	}
	s := m.network.slots
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ready) == 0 {
		return ""
	}
	id := s.ready[0]
	s.ready = s.ready[1:]
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return id
}

// sandboxID is the id of a new sandbox: a prepared network's when one
// waits and the sandbox gets a network, a new one otherwise.
func (m *Manager) sandboxID(plan *netPlan) string {
	if plan != nil {
		if id := m.takeNetSlot(); id != "" {
			return id
		}
	}
	return newID()
}

// detachLater removes a stopped sandbox's network in the background
// (rules, listeners, veth, namespace: ~35 ms, mostly the kernel's), one
// at a time. Only
// for sandboxes whose id is never attached again (stopped for good).
func (m *Manager) detachLater(id string) {
	if m.network == nil {
		return
	}
	s := m.network.slots
	s.mu.Lock()
	s.detaching++
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			if s.detaching--; s.detaching == 0 {
				s.idle.Broadcast()
			}
			s.mu.Unlock()
		}()
		s.serial.Lock()
		defer s.serial.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		m.detachNetwork(ctx, id)
	}()
}

// closeNetSlots stops preparing networks, removes the prepared ones and
// waits for the background detaches. Manager.Close calls it last.
func (m *Manager) closeNetSlots() {
	if m.network == nil {
		return
	}
	s := m.network.slots
	s.mu.Lock()
	s.closed = true
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	s.mu.Lock()
	ids := s.ready
	s.ready = nil
	s.mu.Unlock()
	for _, id := range ids {
		m.detachLater(id)
	}
	s.waitDetached()
}

// WaitNetworkTeardown waits until the networks of the sandboxes stopped so
// far are removed from the host (they are removed in the background after
// a stop; see PoolConfig.NetworkSlots).
func (m *Manager) WaitNetworkTeardown() {
	if m.network != nil {
		m.network.slots.waitDetached()
	}
}

// PreparedNetworks returns the sandbox ids whose networks are prepared and
// wait for a create (see PoolConfig.NetworkSlots): they are the server's,
// not leftovers.
func (m *Manager) PreparedNetworks() []string {
	if m.network == nil {
		return nil
	}
	s := m.network.slots
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ready)
}
