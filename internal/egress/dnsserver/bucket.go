package dnsserver

import (
	"sync"
	"time"
)

// Bucket is a token bucket: Allow takes a token, tokens come back at rate
// per second up to burst. Safe for concurrent use.
type Bucket struct {
	mu     sync.Mutex
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
}

// NewBucket returns a full bucket of burst tokens refilled at rate tokens
// per second (both >= 1).
func NewBucket(rate, burst int) *Bucket {
	return &Bucket{rate: float64(max(rate, 1)), burst: float64(max(burst, 1)), tokens: float64(max(burst, 1)), now: time.Now}
}

// Allow takes a token if there is one.
func (b *Bucket) Allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
