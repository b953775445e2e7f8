package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/egress/policy"
	"withruntime.dev/runtime/internal/leader"
)

// nullDriver runs nothing; as a driver.Networker it keeps the server off
// this host's network (no namespaces, no egress proxy).
type nullDriver struct{}

func (nullDriver) Name() string { return "null" }
func (nullDriver) Create(context.Context, driver.Spec) (*driver.Handle, error) {
	return nil, errors.New("null driver")
}
func (nullDriver) Recover(context.Context, string, []byte) (*driver.Handle, error) {
	return nil, driver.ErrNotFound
}
func (nullDriver) Destroy(context.Context, string) error                   { return nil }
func (nullDriver) List(context.Context) ([]string, error)                  { return nil, nil }
func (nullDriver) CheckNetwork(policy.Policy, int) error                   { return nil }
func (nullDriver) SetNetwork(context.Context, string, policy.Policy) error { return nil }

// fakeElector leads when the test says so.
type fakeElector struct {
	terms   chan context.Context
	running atomic.Bool // Run has not returned
}

func (e *fakeElector) Run(ctx context.Context, lead func(context.Context)) error {
	e.running.Store(true)
	defer e.running.Store(false)
	for {
		select {
		case <-ctx.Done():
			return nil
		case t := <-e.terms:
			// A term ends when the test ends it or Run's context ends.
			tctx, cancel := context.WithCancel(ctx)
			stop := context.AfterFunc(t, cancel)
			lead(tctx)
			stop()
			cancel()
		}
	}
}

func (e *fakeElector) Status() leader.Status {
	return leader.Status{Identity: "replica-1", Leader: "replica-0"}
}

func openTestServer(t *testing.T, el leader.Elector) *Server {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("Open needs root")
	}
	srv, err := Open(context.Background(), Config{DataDir: t.TempDir(), Driver: nullDriver{}, Elector: el})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func health(t *testing.T, h http.Handler) map[string]json.RawMessage {
	t.Helper()
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest("GET", "/v1/health", nil))
	var out map[string]json.RawMessage
	if err := json.Unmarshal(rr.Body.Bytes(), &out); err != nil {
		t.Fatalf("health %d %s: %v", rr.Code, rr.Body, err)
	}
	return out
}

func leaderGauge(t *testing.T, srv *Server) string {
	t.Helper()
	rr := httptest.NewRecorder()
	srv.Metrics.Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rr.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "withruntime_leader{") {
			return line
		}
	}
	return ""
}

// TestLeaderStatus: with an elector, GET /v1/health and the
// withruntime_leader gauge say whether this server leads, following the
// elector's terms; Close ends the election before the store closes.
func TestLeaderStatus(t *testing.T) {
	el := &fakeElector{terms: make(chan context.Context)}
	srv := openTestServer(t, el)
	closed := false
	defer func() {
		if !closed {
			srv.Close()
		}
	}()
	want := func(leading bool) {
		t.Helper()
		wantJSON := `{"identity":"replica-1","leader":"replica-0","leading":` + map[bool]string{true: "true", false: "false"}[leading] + `}`
		wantGauge := `withruntime_leader{identity="replica-1"} ` + map[bool]string{true: "1", false: "0"}[leading]
		var got, gauge string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			got, gauge = string(health(t, srv.Handler)["leader"]), leaderGauge(t, srv)
			if got == wantJSON && gauge == wantGauge {
				return
			}
		}
		t.Fatalf("health leader %s, gauge %q; want %s and %q", got, gauge, wantJSON, wantGauge)
	}
	want(false)
	term, end := context.WithCancel(context.Background())
	el.terms <- term
	want(true)
	end()
	want(false)
	el.terms <- context.Background() // a term that only Close ends
	want(true)
	srv.Close()
	closed = true
	if el.running.Load() {
		t.Error("the election still runs after Close")
	}
	if srv.Manager.Leading() {
		t.Error("the manager still leads after Close")
	}
}

// TestNoLeaderElection: without an elector (one server) there is no leader
// field and no gauge, and the manager does the leader-only work.
func TestNoLeaderElection(t *testing.T) {
	srv := openTestServer(t, nil)
	defer srv.Close()
	if l, ok := health(t, srv.Handler)["leader"]; ok {
		t.Errorf("health has leader %s without leader election", l)
	}
	if g := leaderGauge(t, srv); g != "" {
		t.Errorf("gauge %q without leader election", g)
	}
	if !srv.Manager.Leading() {
		t.Error("a single server does not do the leader-only work")
	}
}
