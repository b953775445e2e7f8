package withruntime

import (
	"context"
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

// silentServer accepts connections and never answers, as a server stopped
// with SIGSTOP does (the kernel accepts for it).
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 100)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	t.Cleanup(func() {
		l.Close()
		for len(conns) > 0 {
			(<-conns).Close()
		}
	})
	return "http://" + l.Addr().String()
}

// TestStoppedServer: every call to a server that accepts and never answers
// fails within the response timeout, naming the server and the seconds.
func TestStoppedServer(t *testing.T) {
	url := silentServer(t)
	c, err := NewClient(WithBaseURL(url), WithAPIKey("wr_x"), WithResponseTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.List(context.Background(), ListFilter{})
	var te *TimeoutError
	if !errors.As(err, &te) || te.Idle || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("err = %v, want a TimeoutError", err)
	}
	if took := time.Since(start); took < 500*time.Millisecond || took > 5*time.Second {
		t.Errorf("failed after %s", took)
	}
	for _, want := range []string{url, "GET /v1/sandboxes", "within 0.5 s", "WithResponseTimeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	// A collected exec waits for its own timeout besides: 0.5 s + 1 s.
	sbx := &Sandbox{c: c, id: "sbx_1"}
	start = time.Now()
	_, err = sbx.Exec(context.Background(), ExecRequest{Command: "true", TimeoutSeconds: 1})
	if took := time.Since(start); !errors.As(err, &te) || took < 1500*time.Millisecond || took > 6*time.Second || te.Seconds != 1.5 {
		t.Errorf("exec: %v after %s", err, took)
	}
}

// TestDerivedWait: a collected exec whose command runs longer than the
// response timeout gets its answer.
func TestDerivedWait(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Second)
		io.WriteString(w, `{"exitCode":0,"stdout":"ok","stderr":"","stdoutTruncated":false,"stderrTruncated":false,"stdoutBytes":2,"stderrBytes":0,"timedOut":false,"durationMs":1000}`)
	}))
	defer srv.Close()
	c, _ := NewClient(WithBaseURL(srv.URL), WithAPIKey("k"), WithResponseTimeout(300*time.Millisecond))
	res, err := (&Sandbox{c: c, id: "sbx_1"}).Exec(context.Background(), ExecRequest{Command: "sleep 1", TimeoutSeconds: 5})
	if err != nil || res.Stdout != "ok" {
		t.Fatalf("%+v %v", res, err)
	}
}

// TestStreamIdle: a stream that stalls fails after the idle timeout;
// heartbeats keep a quiet one going, and the caller never sees them.
func TestStreamIdle(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentTypeNDJSON)
		io.WriteString(w, `{"type":"start","pid":3}`+"\n")
		w.(http.Flusher).Flush()
		if strings.Contains(r.URL.Path, "beats") {
			for range 6 {
				time.Sleep(100 * time.Millisecond)
				io.WriteString(w, `{"type":"heartbeat"}`+"\n")
				w.(http.Flusher).Flush()
			}
			io.WriteString(w, `{"type":"stdout","data":"done\n"}`+"\n"+`{"type":"exit","result":{"exitCode":0,"stdout":"","stderr":"","stdoutTruncated":false,"stderrTruncated":false,"stdoutBytes":5,"stderrBytes":0,"timedOut":false,"durationMs":600}}`+"\n")
			return
		}
		<-release
	}))
	defer srv.Close()
	defer close(release)
	c, _ := NewClient(WithBaseURL(srv.URL), WithAPIKey("k"), WithIdleTimeout(300*time.Millisecond))
	var types []string
	for ev, err := range (&Sandbox{c: c, id: "beats"}).ExecStream(context.Background(), ExecRequest{Command: "x"}) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
	}
	if strings.Join(types, ",") != "start,stdout,exit" {
		t.Fatalf("events %v", types)
	}
	var last error
	for _, err := range (&Sandbox{c: c, id: "stall"}).ExecStream(context.Background(), ExecRequest{Command: "x"}) {
		last = err
	}
	var te *TimeoutError
	if !errors.As(last, &te) || !te.Idle || !strings.Contains(last.Error(), "sent nothing for 0.3 s") {
		t.Fatalf("err = %v, want an idle TimeoutError", last)
	}
}

func TestNoBound(t *testing.T) {
	c, _ := NewClient(WithBaseURL("http://x"), WithResponseTimeout(0), WithIdleTimeout(-1))
	if c.respTimeout != 0 || c.idleTimeout != 0 {
		t.Fatalf("%s %s", c.respTimeout, c.idleTimeout)
	}
	c, _ = NewClient(WithBaseURL("http://x"))
	if c.respTimeout != DefaultResponseTimeout || c.idleTimeout != DefaultIdleTimeout {
		t.Fatalf("defaults %s %s", c.respTimeout, c.idleTimeout)
	}
}
