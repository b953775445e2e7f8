package leader_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/egress/policy"
	"withruntime.dev/runtime/internal/kube/kubetest"
	"withruntime.dev/runtime/internal/leader"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/server"
)

// terms records each server's terms (from before its manager's Lead
// starts the leader-only loops to after they all stopped) and the warm
// pool's boots, which only a leader makes, and reports any boot outside
// its server's term and any overlap of terms.
type terms struct {
	mu     sync.Mutex
	active map[string]bool
	boots  map[string]int
	count  map[string]int
	faults []string
}

func (r *terms) begin(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for other := range r.active {
		r.faults = append(r.faults, fmt.Sprintf("%s began a term at %s while %s's ran", name, time.Now().Format("15:04:05.000"), other))
	}
	r.active[name] = true
	r.count[name]++
}

func (r *terms) end(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.active, name)
}

func (r *terms) boot(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.boots[name]++
	if !r.active[name] || len(r.active) != 1 {
		r.faults = append(r.faults, fmt.Sprintf("%s's warm pool booted at %s while the terms running were %v", name, time.Now().Format("15:04:05.000"), r.active))
	}
}

// recorded wraps a server's elector to record its terms.
type recorded struct {
	*leader.Lease
	name string
	rec  *terms
}

func (e recorded) Run(ctx context.Context, lead func(context.Context)) error {
	return e.Lease.Run(ctx, func(ctx context.Context) {
		e.rec.begin(e.name)
		defer e.rec.end(e.name)
		lead(ctx)
	})
}

// bootDriver records each boot and fails it, so that the warm pool tries
// again every 2 s while its server leads. As a driver.Networker it keeps
// the server off the host's network.
type bootDriver struct {
	name string
	rec  *terms
}

func (d bootDriver) Name() string { return "boot-recorder" }
func (d bootDriver) Create(context.Context, driver.Spec) (*driver.Handle, error) {
	d.rec.boot(d.name)
	return nil, errors.New("test: no sandboxes here")
}
func (bootDriver) Recover(context.Context, string, []byte) (*driver.Handle, error) {
	return nil, driver.ErrNotFound
}
func (bootDriver) Destroy(context.Context, string) error                   { return nil }
func (bootDriver) List(context.Context) ([]string, error)                  { return nil, nil }
func (bootDriver) CheckNetwork(policy.Policy, int) error                   { return nil }
func (bootDriver) SetNetwork(context.Context, string, policy.Policy) error { return nil }

type cutTransport struct {
	rt  http.RoundTripper
	cut *atomic.Bool
}

func (c cutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("test: network to the API server cut")
	}
	return c.rt.RoundTrip(r)
}

type replica struct {
	name   string
	srv    *server.Server
	cut    atomic.Bool
	closed bool
}

func (r *replica) health(t *testing.T) api.LeaderStatus {
	t.Helper()
	rr := httptest.NewRecorder()
	r.srv.Handler.ServeHTTP(rr, httptest.NewRequest("GET", "/v1/health", nil))
	var h api.Health
	if err := json.Unmarshal(rr.Body.Bytes(), &h); err != nil || h.Leader == nil {
		t.Fatalf("%s: health %s: %v", r.name, rr.Body, err)
	}
	return *h.Leader
}

// TestServersShareLeadership: two servers (server.Open, each with a warm
// pool) elect through a Lease on a real API server. Only the leader's pool
// boots, at every moment (recorded per boot); GET /v1/health says who
// leads on both; when the leader's network to the API server is cut, the
// other takes over within the lease duration, after the old leader's loops
// stopped; when that one closes, the first takes over at once.
func TestServersShareLeadership(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{})
	templates := os.Getenv("WITHRUNTIME_TEMPLATES_DIR")
	if _, err := os.Stat(filepath.Join(templates, "base", "rootfs")); templates == "" || err != nil {
		t.Skip("WITHRUNTIME_TEMPLATES_DIR has no base template (the warm pool boots it)")
	}
	if os.Geteuid() != 0 {
		t.Skip("server.Open needs root")
	}
	const lease = 3 * time.Second
	rec := &terms{active: map[string]bool{}, boots: map[string]int{}, count: map[string]int{}}
	open := func(name string) *replica {
		r := &replica{name: name}
		cfg := rest.CopyConfig(c.Config)
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return cutTransport{rt: rt, cut: &r.cut} }
		cfg.Timeout = 2 * time.Second
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		el, err := leader.New(leader.Config{Client: client, Namespace: "default", Name: "withruntime-servers", Identity: name,
			LeaseDuration: lease, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		r.srv, err = server.Open(context.Background(), server.Config{DataDir: t.TempDir(), TemplatesDir: templates,
			Driver: bootDriver{name: name, rec: rec}, Elector: recorded{Lease: el, name: name, rec: rec},
			Pool: sandbox.PoolConfig{Size: 1, Templates: []string{"base"}}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := open("server-a"), open("server-b")
	defer func() {
		for _, r := range []*replica{a, b} {
			r.cut.Store(false)
			if !r.closed {
				r.srv.Close()
			}
		}
	}()
	waitLeader := func(want *replica, timeout time.Duration) time.Duration {
		t.Helper()
		t0 := time.Now()
		for time.Since(t0) < timeout {
			if want.health(t).Leading {
				return time.Since(t0)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("%s does not lead after %v", want.name, timeout)
		return 0
	}
	var first, second *replica
	for deadline := time.Now().Add(10 * time.Second); first == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no leader in 10 s")
		}
		switch {
		case a.health(t).Leading:
			first, second = a, b
		case b.health(t).Leading:
			first, second = b, a
		}
	}
	time.Sleep(5 * time.Second) // the pool tries again every 2 s, on the leader only
	if h := second.health(t); h.Leading || h.Leader != first.name || h.Identity != second.name {
		t.Errorf("%s's health says %+v while %s leads", second.name, h, first.name)
	}

	first.cut.Store(true)
	took := waitLeader(second, lease+3*time.Second)
	t.Logf("%s cut from the API server: %s leads after %v", first.name, second.name, took.Round(time.Millisecond))
	if took > lease+time.Second {
		t.Errorf("takeover after %v, want within the lease duration %v (and a retry or two)", took, lease)
	}
	time.Sleep(5 * time.Second)
	first.cut.Store(false)

	t0 := time.Now()
	second.srv.Close()
	second.closed = true
	waitLeader(first, lease)
	t.Logf("%s closed: %s leads after %v", second.name, first.name, time.Since(t0).Round(time.Millisecond))
	if d := time.Since(t0); d >= lease {
		t.Errorf("takeover after a close took %v, want less than the lease duration (the Lease is released)", d)
	}
	time.Sleep(3 * time.Second)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, f := range rec.faults {
		t.Error(f)
	}
	t.Logf("pool boots %v, terms %v", rec.boots, rec.count)
	if rec.boots[first.name] == 0 || rec.boots[second.name] == 0 {
		t.Errorf("pool boots %v: each server should have booted while it led", rec.boots)
	}
}
