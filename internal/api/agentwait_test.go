package api

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/httpwait"
)

// shortBounds shrinks the agent bounds for one test.
func shortBounds(t *testing.T) {
	saved := []time.Duration{agentGrace, agentQuickWait, agentIdle, agentProbeEvery, agentProbeTimeout}
	agentGrace, agentQuickWait, agentIdle, agentProbeEvery, agentProbeTimeout =
		200*time.Millisecond, 400*time.Millisecond, 300*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	t.Cleanup(func() {
		agentGrace, agentQuickWait, agentIdle, agentProbeEvery, agentProbeTimeout = saved[0], saved[1], saved[2], saved[3], saved[4]
	})
}

// fakeAgent serves handler as a sandbox's agent; its transport is what
// AgentTransport would give.
func fakeAgent(t *testing.T, handler http.HandlerFunc) http.RoundTripper {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return rewriteHost{srv.URL[len("http://"):]}
}

// rewriteHost sends "http://agent/..." to a test server.
type rewriteHost struct{ host string }

func (r rewriteHost) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Host, req.Host = r.host, r.host
	return http.DefaultTransport.RoundTrip(req)
}

func agentGet(t *testing.T, rt http.RoundTripper, path string, b httpwait.Bounds) (*http.Response, error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(httpwait.WithBounds(t.Context(), b), "POST", "http://agent"+path, strings.NewReader("{}"))
	return (&Server{}).boundAgent(rt, "sbx_test").RoundTrip(req)
}

func TestAgentBoundsByRoute(t *testing.T) {
	route := func(path string) agentRoute {
		for _, ar := range agentRoutes {
			if ar.path == path && ar.method == "POST" {
				return ar
			}
		}
		t.Fatalf("no route %s", path)
		return agentRoute{}
	}
	req := func(target, accept string) *http.Request {
		r := httptest.NewRequest("POST", target, nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		return r
	}
	for _, c := range []struct {
		name string
		ar   agentRoute
		r    *http.Request
		body string
		want time.Duration
	}{
		{"exec with its timeout", route("exec"), req("/x", ""), `{"command":"x","timeoutSeconds":300}`, 300*time.Second + agentGrace},
		{"exec with the default", route("exec"), req("/x", ""), `{"command":"x"}`, agentapi.DefaultExecTimeoutSeconds*time.Second + agentGrace},
		{"streamed exec", route("exec"), req("/x", agentapi.ContentTypeNDJSON), `{"command":"x","timeoutSeconds":300}`, agentQuickWait},
		{"wait with a timeout", route("processes/{pid}/wait"), req("/x?timeoutSeconds=5", ""), "", 5*time.Second + agentGrace},
		{"wait without", route("processes/{pid}/wait"), req("/x", ""), "", 0},
		{"code", route("code"), req("/x", agentapi.ContentTypeNDJSON), `{"code":"1"}`, 0},
		{"a huge timeout", route("exec"), req("/x", ""), `{"command":"x","timeoutSeconds":1e9}`, seconds(1e9) + agentGrace},
		{"a quick route", route("files/mkdir"), req("/x", ""), `{"path":"d"}`, agentQuickWait},
	} {
		var req any // the body as the route's check decodes it
		if c.body != "" {
			req = c.ar.body()
			if err := decodeJSON([]byte(c.body), req); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		b := agentBounds(c.ar, c.r, req)
		if b.Headers != c.want || b.Idle != agentIdle {
			t.Errorf("%s: %+v, want headers %s", c.name, b, c.want)
		}
	}
}

// TestAgentSilentHeaders: an agent that never answers is a 504
// agent_timeout once the request's bound is over.
func TestAgentSilentHeaders(t *testing.T) {
	shortBounds(t)
	release := make(chan struct{})
	defer close(release)
	rt := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			w.WriteHeader(200)
			return
		}
		<-release
	})
	start := time.Now()
	_, err := agentGet(t, rt, "/exec", httpwait.Bounds{Headers: 300 * time.Millisecond, Idle: agentIdle})
	ae := agentTimeoutError("sbx_test", err)
	var he *httpError
	if !errors.As(ae, &he) || he.status != http.StatusGatewayTimeout || he.code != codeAgentTimeout {
		t.Fatalf("err %v → %v, want 504 agent_timeout", err, ae)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %s", took)
	}
	if !strings.Contains(he.msg, "sbx_test") || !strings.Contains(he.msg, "did not answer within 0.3 s") {
		t.Errorf("message %q", he.msg)
	}
}

// TestAgentStalledProbe: a request with no bound of its own ends when the
// agent stops answering its health check, and goes on while it answers.
func TestAgentStalledProbe(t *testing.T) {
	shortBounds(t)
	release := make(chan struct{})
	defer close(release)
	healthy := make(chan bool, 1)
	healthy <- true
	rt := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			ok := <-healthy
			healthy <- ok
			if ok {
				w.WriteHeader(200)
				return
			}
			<-release
			return
		}
		if r.URL.Path == "/slow" {
			time.Sleep(time.Second) // five probe periods, every probe answered
			w.WriteHeader(200)
			return
		}
		<-release
	})
	if resp, err := agentGet(t, rt, "/slow", httpwait.Bounds{Idle: agentIdle}); err != nil {
		t.Fatalf("a slow answer of a healthy agent: %v", err)
	} else {
		resp.Body.Close()
	}
	<-healthy
	healthy <- false
	start := time.Now()
	_, err := agentGet(t, rt, "/wait", httpwait.Bounds{Idle: agentIdle})
	if !errors.Is(err, errAgentStalled) {
		t.Fatalf("err %v, want the stalled agent", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %s", took)
	}
	if ae := agentTimeoutError("sbx_test", err); ae == nil || !strings.Contains(ae.Error(), "health checks") {
		t.Errorf("answer %v", ae)
	}
}

// TestAgentStreamStalls: a stream that goes silent past agentIdle ends
// with an agent_timeout error event, after what the agent sent; its
// heartbeats keep a quiet stream alive.
func TestAgentStreamStalls(t *testing.T) {
	shortBounds(t)
	release := make(chan struct{})
	defer close(release)
	rt := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", agentapi.ContentTypeNDJSON)
		io.WriteString(w, `{"type":"start","pid":7}`+"\n")
		w.(http.Flusher).Flush()
		for range 5 {
			time.Sleep(100 * time.Millisecond)
			w.Write(agentapi.HeartbeatLine)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, `{"type":"stdout","data":"partial`)
		w.(http.Flusher).Flush()
		<-release
	})
	resp, err := agentGet(t, rt, "/exec", httpwait.Bounds{Headers: agentQuickWait, Idle: agentIdle})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var types []string
	var last agentapi.Event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var ev agentapi.Event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			types = append(types, "junk")
			continue
		}
		types = append(types, ev.Type)
		last = ev
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("the stream broke instead of ending: %v", err)
	}
	got := strings.Join(types, ",")
	if got != "start,heartbeat,heartbeat,heartbeat,heartbeat,heartbeat,junk,error" || last.Error == nil || last.Error.Code != codeAgentTimeout ||
		!strings.Contains(last.Error.Message, "sent nothing for 0.3 s") {
		t.Fatalf("events %s, last %+v", got, last.Error)
	}
}
