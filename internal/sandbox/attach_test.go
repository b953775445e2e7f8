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
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// recoveringDriver is countingDriver whose Recover finds the sandboxes in
// found (as another server's running pod), slowly, and counts the calls.
type recoveringDriver struct {
	countingDriver
	found     map[string]bool
	recovers  atomic.Int64
	lastState atomic.Value
}

func (d *recoveringDriver) Recover(_ context.Context, id string, state []byte) (*driver.Handle, error) {
	d.recovers.Add(1)
	d.lastState.Store(string(state))
	time.Sleep(50 * time.Millisecond)
	if !d.found[id] {
		return nil, driver.ErrNotFound
	}
	return &driver.Handle{ID: id, State: state, Dial: func(context.Context) (net.Conn, error) { return nil, errors.New("no agent") }}, nil
}

// TestAttachToAnotherServersSandbox: a request for a running sandbox this
// server does not hold (another server created it) attaches to it through
// the driver from the record's driver state, once however many requests
// arrive together, and the next request finds it held; once the record says
// stopped (another server deleted it) the sandbox is answered as stopped
// and no longer held here; a sandbox the driver cannot reach is a conflict,
// not held.
func TestAttachToAnotherServersSandbox(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d := &recoveringDriver{found: map[string]bool{"sbx_other": true}}
	m := New(d, st, rootFS{}, DefaultLimits(), nil)
	defer m.Close()
	m.GateLeaderWork(0)
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, id := range []string{"sbx_other", "sbx_unreachable"} {
		if err := st.InsertSandbox(ctx, store.Sandbox{ID: id, Template: "base", State: store.StateStarting, CPU: 1, MemoryMiB: 512,
			DiskMiB: 1024, CreatedAt: now, LeaseEndsAt: now.Add(time.Hour), Driver: "counting"}); err != nil {
			t.Fatal(err)
		}
		if err := st.MarkRunning(ctx, id, []byte(`{"of":"`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
	}

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.AgentTransport(ctx, "sbx_other"); err != nil {
				t.Errorf("AgentTransport: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := d.recovers.Load(); n != 1 {
		t.Errorf("8 requests together made %d attaches, want 1", n)
	}
	if s, _ := d.lastState.Load().(string); s != `{"of":"sbx_other"}` {
		t.Errorf("attached with driver state %q, want the record's", s)
	}
	if _, err := m.AgentTransport(ctx, "sbx_other"); err != nil || d.recovers.Load() != 1 {
		t.Errorf("a later request: %v, %d attaches; want it served from the cache", err, d.recovers.Load())
	}

	// Another server deletes it.
	if err := st.MarkStopped(ctx, "sbx_other", EndDeleted, m.now()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AgentTransport(ctx, "sbx_other"); !errors.Is(err, errs.Stopped) {
		t.Errorf("request after another server deleted it: %v, want stopped", err)
	}
	m.mu.Lock()
	_, held := m.live["sbx_other"]
	m.mu.Unlock()
	if held {
		t.Error("a sandbox another server stopped is still held here")
	}

	if _, err := m.AgentTransport(ctx, "sbx_unreachable"); !errors.Is(err, errs.Conflict) {
		t.Errorf("a sandbox the driver cannot reach: %v, want a conflict", err)
	}
	m.mu.Lock()
	_, held = m.live["sbx_unreachable"]
	m.mu.Unlock()
	if held {
		t.Error("an unreachable sandbox is held")
	}
}
