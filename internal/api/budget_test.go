package api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/store"
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
	for _, key := range []string{"pace-one", "pace-two", "pace-three", "pace-cancel"} {
		if n := heldBy(key); n != 0 {
			t.Errorf("%d bytes still booked for %s after its reads", n, key)
		}
	}
}

// heldBy is what the body budget holds booked for key, in bytes.
func heldBy(key string) int64 {
	bodies.mu.Lock()
	defer bodies.mu.Unlock()
	return bodies.used[key]
}

// TestReadBodyAnnounced: a body whose length is announced (Content-Length)
// is read into one buffer of that size, all of it booked first: its read
// allocates the body once (io.ReadAll, growing its buffer a quarter at a
// time, allocated about five times the body), a body the key's bound
// cannot hold is refused before a byte is read, a body shorter or longer
// than announced is refused, and nothing stays booked after any of them.
func TestReadBodyAnnounced(t *testing.T) {
	const size = 8 << 20
	body := append(append([]byte(`{"command":"wc -c","stdin":"`), bytes.Repeat([]byte("x"), size-len(`{"command":"wc -c","stdin":""}`))...), `"}`...)
	request := func(key string, r io.Reader, announced int64) *http.Request {
		req := httptest.NewRequest("POST", "/v1/sandboxes/sbx_x/exec", r)
		req.ContentLength = announced
		return req.WithContext(context.WithValue(req.Context(), keyCtx{}, store.Key{ID: key}))
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	data, release, err := readBody(request("announced", bytes.NewReader(body), int64(len(body))), maxExecBytes)
	took := time.Since(t0)
	runtime.ReadMemStats(&after)
	if least := time.Duration(float64(len(body)-paceFreeBytes-paceBurstBytes) / paceBytesPerSecond * float64(time.Second)); took < least {
		t.Errorf("a body of %d bytes read in %v: the pace wants at least %v", len(body), took, least)
	}
	if err != nil || !bytes.Equal(data, body) {
		t.Fatalf("readBody: %d bytes, %v", len(data), err)
	}
	if got := heldBy("announced"); got != bodyCopies*int64(len(body)) {
		t.Errorf("while held: %d bytes booked, want %d", got, bodyCopies*len(body))
	}
	release()
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(len(body))*5/4 {
		t.Errorf("reading a body of %d bytes allocated %d bytes, want about the body once", len(body), alloc)
	}
	var req execRequest
	if err := decodeJSON(data, &req, req.bounds()...); err != nil || len(req.Stdin) != size-len(`{"command":"wc -c","stdin":""}`) {
		t.Errorf("decode: %v, stdin of %d bytes", err, len(req.Stdin))
	}

	// The key holds all but a little of its bound: the body is refused
	// with nothing read.
	if !bodies.take("full", maxHeldBytesPerKey-bodyCopies*int64(len(body))+1) {
		t.Fatal("could not book the bound")
	}
	defer bodies.give("full", maxHeldBytesPerKey-bodyCopies*int64(len(body))+1)
	src := &countingReader{r: bytes.NewReader(body)}
	if _, _, err := readBody(request("full", src, int64(len(body))), maxExecBytes); err == nil || !strings.Contains(err.Error(), "already hold") || src.n != 0 {
		t.Errorf("over the bound: %v after reading %d bytes, want the bound named and nothing read", err, src.n)
	}

	// Shorter and longer than announced.
	if _, _, err := readBody(request("short", bytes.NewReader(body[:len(body)/2]), int64(len(body))), maxExecBytes); err == nil || !strings.Contains(err.Error(), "ended after 4194304 of the 8388608 bytes") {
		t.Errorf("a body shorter than announced: %v", err)
	}
	if _, _, err := readBody(request("long", bytes.NewReader(body), int64(len(body)-1)), maxExecBytes); err == nil || !strings.Contains(err.Error(), "past its Content-Length") {
		t.Errorf("a body longer than announced: %v", err)
	}
	for _, key := range []string{"announced", "short", "long"} {
		if got := heldBy(key); got != 0 {
			t.Errorf("key %s: %d bytes still booked", key, got)
		}
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
