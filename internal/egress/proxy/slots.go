package proxy

import "sync"

// Limit names, as Proxy.Limited hears them and the metrics label them: the
// share a refused connection was over.
const (
	// LimitSandbox is one sandbox's share (Proxy.MaxConns).
	LimitSandbox = "sandbox"
	// LimitKey is one API key's share, all its sandboxes together
	// (NewShares perKey).
	LimitKey = "key"
	// LimitServer is the server's total, every sandbox's together.
	LimitServer = "server"
)

// Slots caps the connections that several proxies serve at once: all
// sandboxes' together (the server's total) and, with NewShares, each API
// key's sandboxes together. Each connection is a file descriptor of the
// server (two once dialed upstream), and a sandbox holds one slot per
// connection for as long as it keeps it open (a connection that sends
// nothing still waits PeekTimeout): without a shared cap, a tenant's few
// sandboxes could take every descriptor of the server, whose destroys then
// fail; without a per-key share, one tenant's could take the whole total
// and every other tenant's egress would be reset. Safe for concurrent use;
// the zero value admits nothing, use NewSlots or NewShares.
type Slots struct {
	mu        sync.Mutex
	used, max int
	perKey    int
	keys      map[string]int
}

// NewSlots returns a cap of max connections at once (max >= 1), with no
// per-key share.
func NewSlots(max int) *Slots { return &Slots{max: max} }

// NewShares returns a cap of max connections at once in total and perKey
// for the sandboxes of any one key together (perKey <= 0: no per-key
// share). Connections of sandboxes with no key ("") count in the total
// only.
func NewShares(max, perKey int) *Slots {
	return &Slots{max: max, perKey: perKey, keys: map[string]int{}}
}

// acquire takes a slot for key's sandbox if one is free, and returns ""; or
// the limit (LimitKey, LimitServer) that is full.
func (s *Slots) acquire(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	perKey := key != "" && s.perKey > 0
	if perKey && s.keys[key] >= s.perKey {
		return LimitKey
	}
	if s.used >= s.max {
		return LimitServer
	}
	s.used++
	if perKey {
		s.keys[key]++
	}
	return ""
}

// release frees a slot taken with acquire(key).
func (s *Slots) release(key string) {
	s.mu.Lock()
	s.used--
	if key != "" && s.perKey > 0 {
		if s.keys[key]--; s.keys[key] <= 0 {
			delete(s.keys, key)
		}
	}
	s.mu.Unlock()
}

// InUse is how many slots are taken.
func (s *Slots) InUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// KeyInUse is how many slots key's sandboxes hold together (0 without a
// per-key share).
func (s *Slots) KeyInUse(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key]
}
