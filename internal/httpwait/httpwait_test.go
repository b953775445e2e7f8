package httpwait

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// silentListener accepts connections and never answers on them.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

func TestHeadersBound(t *testing.T) {
	url := silentListener(t)
	c := &http.Client{Transport: &Transport{Default: Bounds{Headers: 300 * time.Millisecond, Hint: "raise it"}}}
	start := time.Now()
	_, err := c.Get(url + "/v1/sandboxes")
	took := time.Since(start)
	var te *TimeoutError
	if !errors.As(err, &te) || te.Phase != PhaseHeaders {
		t.Fatalf("err = %v, want a headers TimeoutError", err)
	}
	if took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("failed after %s, want about 0.3 s", took)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Error("not os.ErrDeadlineExceeded")
	}
	for _, want := range []string{url, "GET /v1/sandboxes", "0.3 s", "raise it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

func TestIdleBound(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		io.WriteString(w, "a\n")
		w.(http.Flusher).Flush()
		if r.URL.Path == "/beats" {
			for range 8 { // 0.8 s of heartbeats, each under the bound
				time.Sleep(100 * time.Millisecond)
				io.WriteString(w, "{}\n")
				w.(http.Flusher).Flush()
			}
			io.WriteString(w, "end\n")
			return
		}
		<-release
	}))
	defer srv.Close()
	defer close(release)
	c := &http.Client{Transport: &Transport{Default: Bounds{Headers: time.Second, Idle: 300 * time.Millisecond}}}

	resp, err := c.Get(srv.URL + "/beats")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.HasSuffix(string(b), "end\n") {
		t.Fatalf("a stream with heartbeats: %q, %v", b, err)
	}

	resp, err = c.Get(srv.URL + "/stall")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	_, err = io.ReadAll(resp.Body)
	var te *TimeoutError
	if !errors.As(err, &te) || te.Phase != PhaseIdle {
		t.Fatalf("err = %v, want an idle TimeoutError", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("failed after %s", took)
	}
	if !strings.Contains(err.Error(), "sent nothing for 0.3 s") {
		t.Errorf("message %q", err)
	}
}

// slowBody yields n chunks, one every gap.
type slowBody struct {
	n   int
	gap time.Duration
}

func (s *slowBody) Read(p []byte) (int, error) {
	if s.n == 0 {
		return 0, io.EOF
	}
	time.Sleep(s.gap)
	s.n--
	return copy(p, "x"), nil
}

// TestUploadRestartsHeaders: an upload that keeps moving is not a silent
// server, however long it takes in all, nor is a slow producer (chunks
// 0.5 s apart under a bound of 0.3 s).
func TestUploadRestartsHeaders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		io.WriteString(w, strings.Repeat("y", int(n)))
	}))
	defer srv.Close()
	c := &http.Client{Transport: &Transport{Default: Bounds{Headers: 300 * time.Millisecond}}}
	for _, gap := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond} {
		req, _ := http.NewRequest("PUT", srv.URL, &slowBody{n: 4, gap: gap})
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("chunks %s apart: %v", gap, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "yyyy" {
			t.Fatalf("answer %q", b)
		}
	}
}

func TestWithBoundsOverrides(t *testing.T) {
	url := silentListener(t)
	c := &http.Client{Transport: &Transport{Default: Bounds{Headers: time.Hour}}}
	req, _ := http.NewRequestWithContext(WithBounds(t.Context(), Bounds{Headers: 200 * time.Millisecond}), "GET", url, nil)
	start := time.Now()
	if _, err := c.Do(req); !IsTimeout(err) {
		t.Fatalf("err = %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the context's bound did not apply: %s", took)
	}
}

func TestHeartbeat(t *testing.T) {
	beats := make(chan struct{}, 100)
	stop := Heartbeat(20*time.Millisecond, func() { beats <- struct{}{} })
	time.Sleep(200 * time.Millisecond)
	stop()
	stop() // twice is fine
	n := len(beats)
	if n < 3 {
		t.Errorf("%d beats in 200 ms at 20 ms ticks", n)
	}
	time.Sleep(60 * time.Millisecond)
	if len(beats) != n {
		t.Error("a beat after stop")
	}
}
