package api

import (
	"errors"
	"io"
	"sync"
)

// A JSON request body is read whole before it is checked: up to 1 MiB, and
// 64 MiB for exec (its stdin). The server, not the caller, holds those bytes,
// about three times over while the body is decoded, checked and encoded
// again for the agent, and a key could send many at once: twenty 60 MiB
// execs took 3.7 GiB of the server, a hundred and thirty would end it (and
// the host's other processes) for every tenant. So the memory that one
// key's requests hold at once is bounded: each body byte read is booked
// bodyCopies times, and past maxHeldBytesPerKey a request is refused with
// 503 while the others go on. A forwarded body's bytes are given back once
// the agent has read it, not when the command ends. The E2B facade books
// what it translates against the same bound (Hold).

// bodyCopies is how many copies of a body the server holds while it decodes
// and forwards it: the bytes read, the decoded values, the encoding sent on.
const bodyCopies = 3

// maxHeldBytesPerKey bounds the memory one key's requests hold in the
// server at once, in bytes: 512 MiB, two exec bodies at their maximum
// (each booked bodyCopies times), or many small ones.
const maxHeldBytesPerKey = 512 << 20

// bodies is the server's account of body bytes held, by key id.
var bodies = &bodyBudgets{used: map[string]int64{}, max: maxHeldBytesPerKey}

type bodyBudgets struct {
	mu   sync.Mutex
	used map[string]int64
	max  int64
}

// take books n bytes for key, or reports that it would go over the bound.
func (b *bodyBudgets) take(key string, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used[key]+n > b.max {
		return false
	}
	b.used[key] += n
	return true
}

// give returns n bytes taken for key.
func (b *bodyBudgets) give(key string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used[key] -= n; b.used[key] <= 0 {
		delete(b.used, key)
	}
}

// errBodyBudget ends the read of a body that would go over its key's bound.
var errBodyBudget = errors.New("body budget")

// budgetReader reads a request body, booking each byte read bodyCopies
// times for key.
type budgetReader struct {
	r     io.Reader
	key   string
	mu    sync.Mutex
	taken int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		if !bodies.take(b.key, bodyCopies*int64(n)) {
			return 0, errBodyBudget
		}
		b.mu.Lock()
		b.taken += bodyCopies * int64(n)
		b.mu.Unlock()
	}
	return n, err
}

// release gives back every byte booked; it may be called more than once.
func (b *budgetReader) release() {
	b.mu.Lock()
	n := b.taken
	b.taken = 0
	b.mu.Unlock()
	if n > 0 {
		bodies.give(b.key, n)
	}
}

// heldBody is a checked body on its way to the agent: at its end (or
// Close) the bytes are given back and no longer referenced.
type heldBody struct {
	mu      sync.Mutex
	data    []byte
	off     int
	release func()
}

func (h *heldBody) Read(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.off >= len(h.data) {
		h.done()
		return 0, io.EOF
	}
	n := copy(p, h.data[h.off:])
	h.off += n
	return n, nil
}

func (h *heldBody) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done()
	return nil
}

func (h *heldBody) done() {
	h.data, h.off = nil, 0
	if h.release != nil {
		h.release()
		h.release = nil
	}
}

// MaxHeldBytesPerKey is the bound on the bytes one key's requests hold in
// the server's memory at once (see Hold): 512 MiB.
const MaxHeldBytesPerKey = maxHeldBytesPerKey

// Hold books n bytes that a request of the key keyID holds in the server's
// memory, against the same per-key bound as request bodies: for the
// in-process callers of the API (the E2B facade) that decode and re-encode
// what passes through them. It reports false, booking nothing, when the key
// would go over MaxHeldBytesPerKey; give the bytes back with Release.
func Hold(keyID string, n int64) bool { return bodies.take(keyID, n) }

// Release gives back n bytes booked with Hold.
func Release(keyID string, n int64) { bodies.give(keyID, n) }
