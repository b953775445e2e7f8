package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingWriter counts the bytes written to it (the server's log) and
// keeps none of them.
type countingWriter struct{ n atomic.Int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// openLoggedServer opens a server on the null driver that logs into a
// counter, and serves it on a loopback listener of its own (the real
// http.Server of Serve, with its caps).
func openLoggedServer(t *testing.T) (*Server, string, *countingWriter) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("Open needs root")
	}
	logs := &countingWriter{}
	cfg := Config{DataDir: t.TempDir(), Driver: nullDriver{}, Log: slog.New(slog.NewTextHandler(logs, nil))}
	srv, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx, l)
	}()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return srv, l.Addr().String(), logs
}

// randomToken is n random upper-case letters: a valid HTTP method (a
// token), as net/http accepts any.
func randomToken(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('A' + rng.IntN(26))
	}
	return string(b)
}

// heapAfterGC is the live heap once garbage is collected.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// sendRaw sends n requests from workers connections in parallel, each
// written as head(i) by hand (net/http's client would not send a head
// this size), and gives each answer's status (0: no answer) to check.
func sendRaw(t *testing.T, addr string, n, workers int, head func(i int) string, check func(status int, err error)) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				c, err := net.Dial("tcp", addr)
				if err != nil {
					check(0, err)
					return
				}
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				// The server may answer and close before it read the whole
				// head (a 431): write on the side, read the answer here.
				h := head(i)
				go func() { _, _ = io.WriteString(c, h) }()
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					check(0, err)
				} else {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					check(resp.StatusCode, nil)
				}
				c.Close()
			}
		})
	}
	wg.Wait()
}

// scrapeSize is the size of the API's GET /metrics (read up to limit+1).
func scrapeSize(t *testing.T, addr, key string, limit int64) (int64, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(body)), string(body)
}

// TestHostileMethodsBounded is issue 25's N11, sent with no key: a
// thousand requests whose method (and path and User-Agent) are tens of
// kilobytes, and a thousand whose method is 1 MiB. Before, each method
// became a metrics label and a log field: 400 such requests took a server
// from 58 to 553 MiB, never freed, and /metrics to 4.75 GB. Now methods
// outside the standard set share the label "other", request fields in the
// log are cut to metrics.MaxLogField bytes, and a head over MaxHeaderBytes
// is answered 431 before any handler runs; /metrics stays under 1 MB, the
// heap stays flat and the log grows by a bounded line per request.
func TestHostileMethodsBounded(t *testing.T) {
	srv, addr, logs := openLoggedServer(t)
	rng := rand.New(rand.NewPCG(25, 11))
	var mu sync.Mutex
	tokens := make([]string, 64) // random parts made up front; each request combines them
	for i := range tokens {
		tokens[i] = randomToken(rng, 24<<10)
	}

	sendRaw(t, addr, 20, 4, func(int) string { return "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n" }, func(int, error) {})
	heap0, logs0 := heapAfterGC(), logs.n.Load()

	// Heads that fit under the cap: they reach the middleware.
	const n = 1000
	statuses := map[int]int{}
	sendRaw(t, addr, n, 8, func(i int) string {
		method := tokens[i%len(tokens)][:16<<10+i%(8<<10)] + fmt.Sprint(i)
		path := "/" + strings.ToLower(tokens[(i+1)%len(tokens)][:8<<10])
		return method + " " + path + " HTTP/1.1\r\nHost: x\r\nUser-Agent: " + tokens[(i+2)%len(tokens)][:8<<10] +
			"\r\nX-Request-Id: " + tokens[(i+3)%len(tokens)][:4<<10] + "\r\n\r\n"
	}, func(status int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Errorf("a request with a long method: %v", err)
		}
		statuses[status]++
	})
	for st := range statuses {
		if st == 0 || st == http.StatusRequestHeaderFieldsTooLarge || st >= 500 {
			t.Errorf("answers to requests with 16-24 KiB methods: %v; want each to reach the API (4xx)", statuses)
		}
	}
	check := func(phase string) {
		t.Helper()
		size, body := scrapeSize(t, addr, srv.LocalKey, 1<<20)
		if size > 1<<20 {
			t.Fatalf("%s: GET /metrics is over 1 MiB (first bytes: %.300s)", phase, body)
		}
		if !strings.Contains(body, `method="other"`) {
			t.Errorf("%s: no method=\"other\" series in /metrics", phase)
		}
		grown := int64(heapAfterGC()) - int64(heap0)
		t.Logf("%s: /metrics %d bytes, heap grown by %d KiB, log %d bytes per request", phase, size, grown>>10, (logs.n.Load()-logs0)/n)
		if grown > 8<<20 {
			t.Fatalf("%s: the server's heap grew by %d MiB and stayed", phase, grown>>20)
		}
		if per := (logs.n.Load() - logs0) / n; per > 2<<10 {
			t.Fatalf("%s: the log grew by %d bytes per request", phase, per)
		}
	}
	check("1,000 requests with 16-24 KiB methods")

	// 1 MiB methods: refused at the head, counted nowhere.
	big := strings.Repeat(tokens[0], (1<<20)/len(tokens[0]))
	refused := atomic.Int64{}
	sendRaw(t, addr, n, 64, func(i int) string {
		return big[i:] + tokens[i%len(tokens)][:i%1000+1] + " / HTTP/1.1\r\nHost: x\r\n\r\n"
	}, func(status int, err error) {
		if status == http.StatusRequestHeaderFieldsTooLarge {
			refused.Add(1)
		}
	})
	if refused.Load() != n {
		t.Errorf("%d of %d requests with 1 MiB methods answered 431, want all", refused.Load(), n)
	}
	check("and 1,000 requests with 1 MiB methods")
}
