package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// serveOn serves h on a loopback listener until the test ends.
func serveOn(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = (&Server{Handler: h}).Serve(ctx, l)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l.Addr().String()
}

// TestServeClosesIdleConnections: a kept-alive connection that sends nothing
// more is closed, so idle connections cannot pile up until the server has no
// file descriptor left.
func TestServeClosesIdleConnections(t *testing.T) {
	defer func(d time.Duration) { idleTimeout = d }(idleTimeout)
	idleTimeout = 300 * time.Millisecond
	addr := serveOn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err == nil || isTimeout(err) {
		t.Fatalf("an idle keep-alive connection was still open after 5 s (read: %v)", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestServeCapsConnections: no more than maxConns() connections are served
// at once; the others wait and are served when one ends.
func TestServeCapsConnections(t *testing.T) {
	defer func(f func() int) { maxConns = f }(maxConns)
	const limit = 4
	maxConns = func() int { return limit }
	var inside atomic.Int32
	release := make(chan struct{})
	addr := serveOn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside.Add(1)
		<-release
	}))
	var conns []net.Conn
	for range limit + 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		conns = append(conns, c)
	}
	time.Sleep(500 * time.Millisecond)
	if n := inside.Load(); n != limit {
		t.Fatalf("%d requests served at once, want the cap, %d", n, limit)
	}
	close(release)
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatalf("a connection past the cap was never served: %v", err)
		}
	}
}

func TestConnLimit(t *testing.T) {
	if n := connLimit(); n < 64 {
		t.Fatalf("connLimit() = %d, want at least 64", n)
	}
}
