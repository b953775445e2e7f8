package api

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"
)

// TestBodyPace: a body's first paceFreeBytes are read at once; past them a
// key's bodies share paceBytesPerSecond, so two bodies of one key take
// twice as long as one, while another key's body is not slowed by them;
// a request that ends while it waits stops reading.
func TestBodyPace(t *testing.T) {
	const over = 8 << 20 // paced bytes per body: 1/4 s at the pace
	read := func(ctx context.Context, key string) (time.Duration, error) {
		t0 := time.Now()
		br := &budgetReader{ctx: ctx, r: bytes.NewReader(make([]byte, paceFreeBytes+over)), key: key}
		defer br.release()
		n, err := io.Copy(io.Discard, br)
		if err == nil && n != paceFreeBytes+over {
			t.Errorf("read %d bytes, want %d", n, paceFreeBytes+over)
		}
		return time.Since(t0), err
	}
	least := time.Duration(float64(over-paceBurstBytes) / paceBytesPerSecond * float64(time.Second))

	if d, err := read(context.Background(), "pace-one"); err != nil || d < least {
		t.Errorf("one body: %v %v, want at least %v", d, err, least)
	}
	// Two of key "pace-two" at once, and one of "pace-three" beside them.
	type res struct {
		d   time.Duration
		err error
	}
	two, three := make(chan res, 2), make(chan res, 1)
	for range 2 {
		go func() { d, err := read(context.Background(), "pace-two"); two <- res{d, err} }()
	}
	go func() { d, err := read(context.Background(), "pace-three"); three <- res{d, err} }()
	slowest := time.Duration(0)
	for range 2 {
		r := <-two
		if r.err != nil {
			t.Fatal(r.err)
		}
		slowest = max(slowest, r.d)
	}
	if slowest < 2*least {
		t.Errorf("two bodies of one key: the slower took %v, want at least %v (they share the key's pace)", slowest, 2*least)
	}
	if r := <-three; r.err != nil || r.d >= slowest {
		t.Errorf("another key's body beside them: %v %v, want done before the slower of the two (%v)", r.d, r.err, slowest)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := read(ctx, "pace-cancel"); err == nil {
		t.Errorf("a body whose request ended: %v, want the request's end", err)
	}
	bodies.mu.Lock()
	defer bodies.mu.Unlock()
	for _, key := range []string{"pace-one", "pace-two", "pace-three", "pace-cancel"} {
		if n := bodies.used[key]; n != 0 {
			t.Errorf("%d bytes still booked for %s after its reads", n, key)
		}
	}
}
