package sandbox

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/store"
)

// countingDriver boots nothing: it counts creates and destroys. Its
// sandboxes' agents never answer (warm-up and claims fail), which the
// gating tests do not need.
type countingDriver struct {
	mu        sync.Mutex
	creates   int
	destroyed []string
}

func (d *countingDriver) Name() string { return "counting" }
func (d *countingDriver) Create(ctx context.Context, spec driver.Spec) (*driver.Handle, error) {
	d.mu.Lock()
	d.creates++
	d.mu.Unlock()
	return &driver.Handle{ID: spec.ID, Dial: func(context.Context) (net.Conn, error) { return nil, errors.New("no agent") }}, nil
}
func (d *countingDriver) Recover(context.Context, string, []byte) (*driver.Handle, error) {
	return nil, driver.ErrNotFound
}
func (d *countingDriver) Destroy(_ context.Context, id string) error {
	d.mu.Lock()
	d.destroyed = append(d.destroyed, id)
	d.mu.Unlock()
	return nil
}
func (d *countingDriver) List(context.Context) ([]string, error) { return nil, nil }
func (d *countingDriver) counts() (int, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.creates, len(d.destroyed)
}

type rootFS struct{}

func (rootFS) RootFS(string) (string, error) { return "/nonexistent", nil }

// sampleCounter counts metering samples.
type sampleCounter struct{ n atomic.Int64 }

func (c *sampleCounter) MeterSample(string)   { c.n.Add(1) }
func (c *sampleCounter) CreateRefused(string) {}

func newGatedManager(t *testing.T, gated bool) (*Manager, *countingDriver, *store.Store, *sampleCounter) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	d := &countingDriver{}
	m := New(d, st, rootFS{}, DefaultLimits(), nil)
	obs := &sampleCounter{}
	m.SetObserver(obs)
	if gated {
		m.GateLeaderWork(20 * time.Millisecond)
	}
	m.StartMetering(MeterConfig{Interval: 20 * time.Millisecond})
	if err := m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	m.StartPool(PoolConfig{Size: 1, MaxAge: time.Hour})
	t.Cleanup(func() { m.Close(); st.Close() })
	return m, d, st, obs
}

// insertRunning records a running sandbox whose lease ended at end, and
// tracks it as if this server had created it (its lease timer armed).
func insertRunning(t *testing.T, m *Manager, st *store.Store, id string, end time.Time) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	if err := st.InsertSandbox(ctx, store.Sandbox{ID: id, Template: "base", State: store.StateStarting,
		CPU: 1, MemoryMiB: 512, DiskMiB: 2048, CreatedAt: now.Add(-time.Minute), LeaseEndsAt: end.UTC().Truncate(time.Millisecond),
		Driver: "counting", OnLeaseEnd: store.OnLeaseEndStop, TimeoutSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkRunning(ctx, id, nil); err != nil {
		t.Fatal(err)
	}
	m.adopt(id, &driver.Handle{ID: id, Dial: func(context.Context) (net.Conn, error) { return nil, errors.New("no agent") }}, end)
}

func state(t *testing.T, st *store.Store, id string) string {
	t.Helper()
	sb, err := st.GetSandbox(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return sb.State + "/" + sb.EndReason
}

// TestLeaderWorkGated: with GateLeaderWork, nothing leader-only runs until
// Lead — no pool boot, no metering sample, no lease end (the sandbox's own
// timer fires and does nothing) — then all of it runs, the lease sweep
// ending a lease the timer let pass; when Lead's context ends it returns
// with everything stopped and the pooled sandbox destroyed, and nothing
// runs after.
func TestLeaderWorkGated(t *testing.T) {
	m, d, st, obs := newGatedManager(t, true)
	insertRunning(t, m, st, "sbx_ended", time.Now().Add(50*time.Millisecond))
	time.Sleep(300 * time.Millisecond)
	if creates, _ := d.counts(); creates != 0 || obs.n.Load() != 0 || m.Leading() || m.PoolStatus() != nil {
		t.Fatalf("before Lead: %d boots, %d samples, leading %v, pool %v; want none", creates, obs.n.Load(), m.Leading(), m.PoolStatus())
	}
	if got := state(t, st, "sbx_ended"); got != "running/" {
		t.Fatalf("before Lead the ended lease was acted on: %s", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Lead(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		creates, _ := d.counts()
		if creates > 0 && obs.n.Load() > 0 && state(t, st, "sbx_ended") == "stopped/lease_ended" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leading: %d boots, %d samples, sandbox %s; want a boot, samples and the lease ended", creates, obs.n.Load(), state(t, st, "sbx_ended"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !m.Leading() {
		t.Error("Leading() false while Lead runs")
	}
	m.Lead(context.Background()) // a second Lead returns at once

	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Lead did not return after its context ended")
	}
	creates, destroys := d.counts()
	samples := obs.n.Load()
	if m.Leading() || m.PoolStatus() != nil {
		t.Errorf("after Lead: leading %v, pool %v", m.Leading(), m.PoolStatus())
	}
	if destroys < creates {
		t.Errorf("after Lead: %d pooled boots, %d destroyed; want every unclaimed one destroyed", creates, destroys)
	}
	insertRunning(t, m, st, "sbx_later", time.Now().Add(30*time.Millisecond))
	time.Sleep(300 * time.Millisecond)
	if c, _ := d.counts(); c != creates || obs.n.Load() != samples {
		t.Errorf("after Lead returned: boots %d→%d, samples %d→%d; want none", creates, c, samples, obs.n.Load())
	}
	if got := state(t, st, "sbx_later"); got != "running/" {
		t.Errorf("after Lead returned a lease was ended: %s", got)
	}
}

// TestLeaderWorkUngated: without GateLeaderWork (one server, the default)
// everything runs from the start, as before leader election existed, and
// Lead does nothing.
func TestLeaderWorkUngated(t *testing.T) {
	m, d, st, obs := newGatedManager(t, false)
	insertRunning(t, m, st, "sbx_ended", time.Now().Add(50*time.Millisecond))
	deadline := time.Now().Add(5 * time.Second)
	for {
		creates, _ := d.counts()
		if creates > 0 && obs.n.Load() > 0 && state(t, st, "sbx_ended") == "stopped/lease_ended" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d boots, %d samples, sandbox %s; want a boot, samples and the lease ended", creates, obs.n.Load(), state(t, st, "sbx_ended"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !m.Leading() {
		t.Error("Leading() false without gating")
	}
	done := make(chan struct{})
	go func() { defer close(done); m.Lead(context.Background()) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Lead without gating did not return at once")
	}
}
