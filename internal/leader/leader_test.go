package leader

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"withruntime.dev/runtime/internal/kube/kubetest"
)

// TestConfig: timings that leave the old leader no time to stop, and
// missing fields, are refused with ErrConfig.
func TestConfig(t *testing.T) {
	ok := Config{Client: fake.NewClientset(), Namespace: "ns", Name: "runtime", Identity: "a"}
	if _, err := New(ok); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for name, mut := range map[string]func(*Config){
		"no identity": func(c *Config) { c.Identity = "" },
		"no name":     func(c *Config) { c.Name = "" },
		"no client":   func(c *Config) { c.Client = nil },
		"no margin": func(c *Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 12*time.Second, 10*time.Second, 2*time.Second
		},
		"sub-second lease": func(c *Config) { c.LeaseDuration = 15500 * time.Millisecond },
		"deadline < retry": func(c *Config) { c.RenewDeadline, c.RetryPeriod = 2*time.Second, 2*time.Second },
	} {
		c := ok
		mut(&c)
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// recorder is the leader-only loop of the test's servers: it ticks every
// 10 ms while its term runs and records any moment at which two terms ran.
type recorder struct {
	mu       sync.Mutex
	active   map[string]bool
	ticks    map[string]int
	overlaps []string
	started  map[string][]time.Time
	ended    map[string][]time.Time
}

func newRecorder() *recorder {
	return &recorder{active: map[string]bool{}, ticks: map[string]int{},
		started: map[string][]time.Time{}, ended: map[string][]time.Time{}}
}

func (r *recorder) lead(id string) func(ctx context.Context) {
	return func(ctx context.Context) {
		r.mu.Lock()
		for other := range r.active {
			r.overlaps = append(r.overlaps, fmt.Sprintf("%s started leading at %s while %s still led", id, time.Now().Format("15:04:05.000"), other))
		}
		r.active[id] = true
		r.started[id] = append(r.started[id], time.Now())
		r.mu.Unlock()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				r.mu.Lock()
				delete(r.active, id)
				r.ended[id] = append(r.ended[id], time.Now())
				r.mu.Unlock()
				return
			case <-t.C:
			}
			r.mu.Lock()
			if len(r.active) != 1 {
				r.overlaps = append(r.overlaps, fmt.Sprintf("%s's loop ran at %s with %d terms running", id, time.Now().Format("15:04:05.000"), len(r.active)))
			}
			r.ticks[id]++
			r.mu.Unlock()
		}
	}
}

// cuttable is a transport that fails every request while cut: the
// server's network to the API server is gone (it cannot renew, nor
// release).
type cuttable struct {
	rt  http.RoundTripper
	cut *atomic.Bool
}

func (c cuttable) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("test: network to the API server cut")
	}
	return c.rt.RoundTrip(r)
}

type replica struct {
	id     string
	el     *Lease
	cut    atomic.Bool
	cancel context.CancelFunc
	done   chan error
}

// TestLeaseTakeover runs two electors against a real API server (etcd and
// kube-apiserver from scripts/k8s-bins.sh): exactly one leads; when the
// leader's network to the API server is cut (it can neither renew nor
// release: a crash, as the others see it) the other leads within the lease
// duration, and only after the old leader's loop stopped; when the new
// leader stops cleanly it releases the Lease and the first takes over
// within a retry period or two. At no moment do two loops run.
func TestLeaseTakeover(t *testing.T) {
	c := kubetest.Start(t, kubetest.Options{})
	const (
		leaseDuration = 3 * time.Second
		renewDeadline = 2 * time.Second
		retryPeriod   = 250 * time.Millisecond
	)
	rec := newRecorder()
	start := func(id string) *replica {
		r := &replica{id: id, done: make(chan error, 1)}
		cfg := rest.CopyConfig(c.Config)
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return cuttable{rt: rt, cut: &r.cut} }
		// A cut connection must fail at once, not wait for a dial timeout.
		cfg.Timeout = renewDeadline
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r.el, err = New(Config{Client: client, Namespace: "default", Name: "withruntime-leader", Identity: id,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		go func() { r.done <- r.el.Run(ctx, rec.lead(id)) }()
		return r
	}
	a, b := start("server-a"), start("server-b")
	defer func() {
		for _, r := range []*replica{a, b} {
			r.cut.Store(false)
			r.cancel()
			<-r.done
		}
	}()

	leaderOf := func(timeout time.Duration) (*replica, time.Duration) {
		t0 := time.Now()
		for time.Since(t0) < timeout {
			la, lb := a.el.Status().Leading, b.el.Status().Leading
			switch {
			case la && lb:
				t.Fatal("both lead")
			case la:
				return a, time.Since(t0)
			case lb:
				return b, time.Since(t0)
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("no leader within %v", timeout)
		return nil, 0
	}
	// waitLeads waits until r leads (and fails the test if both ever do).
	waitLeads := func(r *replica, timeout time.Duration) (time.Duration, bool) {
		t0 := time.Now()
		for time.Since(t0) < timeout {
			if a.el.Status().Leading && b.el.Status().Leading {
				t.Fatal("both lead")
			}
			if r.el.Status().Leading {
				return time.Since(t0), true
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(t0), false
	}
	first, took := leaderOf(10 * time.Second)
	t.Logf("%s leads after %v", first.id, took.Round(time.Millisecond))
	other := map[*replica]*replica{a: b, b: a}
	second := other[first]
	lease, err := c.Client.CoordinationV1().Leases("default").Get(context.Background(), "withruntime-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *lease.Spec.HolderIdentity; got != first.id {
		t.Fatalf("Lease holder %q, want %q", got, first.id)
	}
	time.Sleep(4 * leaseDuration / 3) // the follower stays a follower while the leader renews
	if s := second.el.Status(); s.Leading || s.Leader != first.id {
		t.Fatalf("follower's status %+v while %s renews", s, first.id)
	}

	// The leader's network is cut: it stops leading by itself, and the
	// follower takes over after the lease expires.
	cutAt := time.Now()
	first.cut.Store(true)
	if took, ok := waitLeads(second, leaseDuration+3*time.Second); !ok {
		t.Fatalf("%s does not lead %v after %s was cut", second.id, took, first.id)
	} else {
		t.Logf("cut %s from the API server: %s leads after %v", first.id, second.id, took.Round(time.Millisecond))
		if max := leaseDuration + 2*retryPeriod; took > max {
			t.Errorf("takeover took %v, want at most the lease duration + two retry periods (%v)", took, max)
		}
	}
	rec.mu.Lock()
	firstEnded := rec.ended[first.id]
	secondStarted := rec.started[second.id]
	rec.mu.Unlock()
	if len(firstEnded) != 1 || len(secondStarted) != 1 {
		t.Fatalf("terms: %s ended %d, %s started %d; want 1 and 1", first.id, len(firstEnded), second.id, len(secondStarted))
	}
	t.Logf("%s's loop stopped %v after the cut, %v before %s's started (stop margin %v)", first.id,
		firstEnded[0].Sub(cutAt).Round(time.Millisecond), secondStarted[0].Sub(firstEnded[0]).Round(time.Millisecond),
		second.id, first.el.StopMargin())
	if !firstEnded[0].Before(secondStarted[0]) {
		t.Errorf("%s's loop ended at %v, after %s's started at %v", first.id, firstEnded[0], second.id, secondStarted[0])
	}

	// The old leader's network comes back: it stays a follower.
	first.cut.Store(false)
	time.Sleep(leaseDuration)
	if s := first.el.Status(); s.Leading {
		t.Fatalf("%s leads again after its network came back while %s renews", first.id, second.id)
	}

	// The new leader stops cleanly: it releases the Lease after its loop
	// stopped, and the first takes over within a few retry periods.
	stopAt := time.Now()
	second.cancel()
	if err := <-second.done; err != nil {
		t.Fatalf("Run of %s: %v", second.id, err)
	}
	second.done <- nil // for the deferred stop
	if took, ok := waitLeads(first, leaseDuration+time.Second); !ok {
		t.Fatalf("%s does not lead %v after %s stopped", first.id, took, second.id)
	} else {
		t.Logf("%s stopped cleanly: %s leads after %v", second.id, first.id, took.Round(time.Millisecond))
		if d := time.Since(stopAt); d >= leaseDuration {
			t.Errorf("takeover after a release took %v, want less than the lease duration %v", d, leaseDuration)
		}
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, o := range rec.overlaps {
		t.Error(o)
	}
	for _, id := range []string{a.id, b.id} {
		if rec.ticks[id] == 0 {
			t.Errorf("%s's loop never ran", id)
		}
	}
	t.Logf("loop ticks: %v; terms started %v", rec.ticks, map[string]int{a.id: len(rec.started[a.id]), b.id: len(rec.started[b.id])})
}
