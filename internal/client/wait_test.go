package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/httpwait"
)

// silentServer accepts connections and never answers, as a server stopped
// with SIGSTOP does (the kernel accepts for it).
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				<-done
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { l.Close(); close(done) })
	return "http://" + l.Addr().String()
}

func TestResponseTimeout(t *testing.T) {
	url := silentServer(t)
	t.Setenv(EnvResponseTimeout, "0.5")
	c := &Client{BaseURL: url, APIKey: "wr_x"}
	start := time.Now()
	_, err := c.ListSandboxes(context.Background(), "")
	var te *httpwait.TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want a TimeoutError", err)
	}
	if took := time.Since(start); took < 500*time.Millisecond || took > 5*time.Second {
		t.Errorf("failed after %s", took)
	}
	for _, want := range []string{url, "GET /v1/sandboxes", "0.5 s", EnvResponseTimeout} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	// A create waits for the boot besides.
	c2 := &Client{BaseURL: url, APIKey: "wr_x", ResponseTimeout: time.Millisecond}
	if b, _ := c2.bounds(waitFor(context.Background(), bootWait)); b.Headers != bootWait+time.Millisecond {
		t.Errorf("create bound %s", b.Headers)
	}
}

func TestTimeoutEnv(t *testing.T) {
	c := &Client{BaseURL: "http://x", APIKey: "k"}
	t.Setenv(EnvResponseTimeout, "soon")
	if _, err := c.ListSandboxes(context.Background(), ""); err == nil || !strings.Contains(err.Error(), EnvResponseTimeout+`="soon"`) {
		t.Errorf("err = %v", err)
	}
	t.Setenv(EnvResponseTimeout, "0")
	t.Setenv(EnvIdleTimeout, "")
	b, err := c.bounds(context.Background())
	if err != nil || b.Headers != 0 || b.Idle != DefaultIdleTimeout {
		t.Errorf("bounds %+v, %v", b, err)
	}
	c.ResponseTimeout, c.IdleTimeout = 2*time.Second, -1
	if b, _ := c.bounds(context.Background()); b.Headers != 2*time.Second || b.Idle != 0 {
		t.Errorf("fields: %+v", b)
	}
}

// TestStreamIdle: a stream that stalls fails after the idle bound with
// the TimeoutError itself (not a StreamError: the server is gone, not the
// sandbox); heartbeats keep a quiet one going.
func TestStreamIdle(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", agentapi.ContentTypeNDJSON)
		io.WriteString(w, `{"type":"start","pid":3}`+"\n")
		w.(http.Flusher).Flush()
		if strings.Contains(r.URL.Path, "beats") {
			for range 6 {
				time.Sleep(100 * time.Millisecond)
				w.Write(agentapi.HeartbeatLine)
				w.(http.Flusher).Flush()
			}
			io.WriteString(w, `{"type":"stdout","data":"done\n"}`+"\n"+`{"type":"exit","result":{"exitCode":0,"stdout":"","stderr":"","stdoutTruncated":false,"stderrTruncated":false,"stdoutBytes":5,"stderrBytes":0,"timedOut":false,"durationMs":600}}`+"\n")
			return
		}
		<-release
	}))
	defer srv.Close()
	defer close(release)
	c := &Client{BaseURL: srv.URL, APIKey: "k", IdleTimeout: 300 * time.Millisecond}
	var out strings.Builder
	res, err := c.ExecStream(context.Background(), "beats", agentapi.ExecRequest{Command: "x"}, func(_ string, b []byte) { out.Write(b) })
	if err != nil || res.ExitCode != 0 || out.String() != "done\n" {
		t.Fatalf("with heartbeats: %+v %v %q", res, err, out.String())
	}
	_, err = c.ExecStream(context.Background(), "stall", agentapi.ExecRequest{Command: "x"}, func(string, []byte) {})
	var te *httpwait.TimeoutError
	var se *StreamError
	if !errors.As(err, &te) || te.Phase != httpwait.PhaseIdle || errors.As(err, &se) {
		t.Fatalf("err = %v (%T), want an idle TimeoutError", err, err)
	}
	if !strings.Contains(err.Error(), "sent nothing for 0.3 s") {
		t.Errorf("message %q", err)
	}
}
