package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/time/rate"
)

// A JSON request body is read whole before it is checked: up to 1 MiB, and
// 64 MiB for exec (its stdin). The server, not the caller, holds those bytes,
// about three times over while the body is decoded, checked and encoded
// again for the agent, and a key could send many at once: twenty 60 MiB
// execs took 3.7 GiB of the server, a hundred and thirty would end it (and
// the host's other processes) for every tenant. So the memory that one
// key's requests hold at once is bounded: each body byte read is booked
// bodyCopies times, and past maxHeldBytesPerKey a request is refused with
// 503 while the others go on; a body that announces its length is booked
// whole before it is read (readAnnounced). A forwarded body's bytes are
// given back once the agent has read it, not when the command ends. The E2B facade books
// what it translates against the same bound (Hold).
//
// The CPU the server spends on those bodies is bounded per key too: past
// a body's first paceFreeBytes, a key's request bodies are read at
// paceBytesPerSecond, shared by all its requests at once. Reading,
// checking and decoding a body runs in the server, outside every
// sandbox's CPU weight: a key sending 60 MB exec bodies back to back (two
// at a time, as the memory bound allows) made another key's exec p99
// 2.8-3.0x its quiet figure, and 2.6x when every body was refused after
// its decode, so nothing reached a sandbox (TestNoisyNeighbours, 2-core
// host). Paced, 1.6-2.2x. A 60 MB stdin then takes about two seconds to
// send; large input belongs in a file (PUT .../files streams to the agent,
// unpaced, without a decode).

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

// paceFreeBytes of each body are read at once; past them a key's bodies
// are read at paceBytesPerSecond in all (see the top of this file), at
// most paceBurstBytes at a time.
const (
	paceFreeBytes      = 1 << 20
	paceBytesPerSecond = 32 << 20
	paceBurstBytes     = 256 << 10
)

// budgetReader reads a request body, booking each byte read bodyCopies
// times for key, and pacing it past paceFreeBytes. It ends with ctx's
// error when ctx ends during a wait.
type budgetReader struct {
	ctx    context.Context
	r      io.Reader
	key    string
	read   int64 // bytes read so far
	booked int64 // bytes booked before they were read (readAnnounced)
	mu     sync.Mutex
	taken  int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	// No read crosses into the paced part, and a paced one is at most a
	// burst, so that every paced byte is waited for.
	paced := b.read >= paceFreeBytes
	if paced {
		p = p[:min(len(p), paceBurstBytes)]
	} else {
		p = p[:min(int64(len(p)), paceFreeBytes-b.read)]
	}
	n, err := b.r.Read(p)
	if n > 0 {
		before := b.read
		b.read += int64(n)
		if paced {
			if werr := bodyPaces.of(b.key).WaitN(b.ctx, n); werr != nil && err == nil {
				err = werr
			}
		}
		if unbooked := b.read - max(before, b.booked); unbooked > 0 {
			if !b.take(unbooked) {
				return 0, errBodyBudget
			}
		}
	}
	return n, err
}

// take books n bytes read (bodyCopies times), or reports that the key
// would go over its bound.
func (b *budgetReader) take(n int64) bool {
	if !bodies.take(b.key, bodyCopies*n) {
		return false
	}
	b.mu.Lock()
	b.taken += bodyCopies * n
	b.mu.Unlock()
	return true
}

// readAnnounced reads a body whose length n the request announced
// (Content-Length) into one buffer of that size, booking all of it first:
// a body the key's bound cannot hold is refused before anything is read.
// io.ReadAll, which does not know the length, grows its buffer as it
// reads, copying what it has each time: it allocated twice an 8 MiB body
// (TestReadBodyAnnounced). A body that ends early is an error, and so is
// one that goes on past n.
func (b *budgetReader) readAnnounced(n int64) ([]byte, error) {
	if !b.take(n) {
		return nil, errBodyBudget
	}
	b.booked = n
	data := make([]byte, n)
	if got, err := io.ReadFull(b, data); err == io.ErrUnexpectedEOF || err == io.EOF {
		return nil, fmt.Errorf("the body ended after %d of the %d bytes its Content-Length announced; send the whole body, or the length it has", got, n)
	} else if err != nil {
		return nil, err
	}
	if extra, err := b.Read(make([]byte, 1)); extra > 0 {
		return nil, fmt.Errorf("the body goes on past its Content-Length of %d bytes", n)
	} else if err != nil && err != io.EOF {
		return nil, err
	}
	return data, nil
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

// bodyPaces holds each key's pace, made at its first body over
// paceFreeBytes: one small limiter per key that ever sent one.
var bodyPaces = &paces{keys: map[string]*rate.Limiter{}}

type paces struct {
	mu   sync.Mutex
	keys map[string]*rate.Limiter
}

func (p *paces) of(key string) *rate.Limiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.keys[key]
	if l == nil {
		l = rate.NewLimiter(paceBytesPerSecond, paceBurstBytes)
		p.keys[key] = l
	}
	return l
}
