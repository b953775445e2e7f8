package proxy

import "sync"

// Slots caps the connections that several proxies serve at once, all
// sandboxes' together. Each connection is a file descriptor of the server
// (two once dialed upstream), and a sandbox holds one slot per connection
// for as long as it keeps it open (a connection that sends nothing still
// waits PeekTimeout): without a shared cap, a tenant's few sandboxes could
// take every descriptor of the server, whose destroys then fail. Safe for
// concurrent use; the zero value admits nothing, use NewSlots.
type Slots struct {
	mu        sync.Mutex
	used, max int
}

// NewSlots returns a cap of max connections at once (max >= 1).
func NewSlots(max int) *Slots { return &Slots{max: max} }

// acquire takes a slot if one is free.
func (s *Slots) acquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used >= s.max {
		return false
	}
	s.used++
	return true
}

// release frees a slot taken with acquire.
func (s *Slots) release() {
	s.mu.Lock()
	s.used--
	s.mu.Unlock()
}

// InUse is how many slots are taken.
func (s *Slots) InUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}
