package sandbox

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/store"
)

// listingDriver is countingDriver whose List reports fixed sandboxes (what
// the cluster runs).
type listingDriver struct {
	countingDriver
	ids []string
}

func (d *listingDriver) List(context.Context) ([]string, error) { return d.ids, nil }
func (d *listingDriver) SharedAcrossServers()                   {}

// TestReconcileSparesLiveCreates: the leader's reconciliation deletes only
// what no live server can still be making. A create under way (record
// "starting" for a minute, its pod up) and a running sandbox are left
// alone; a create "starting" for longer than the grace is failed and
// destroyed; a pod with no record is destroyed only once it has been seen
// without one for the grace; a stopped record's pod is left to the server
// stopping it for a minute, then destroyed; a running record whose pod is
// gone is stopped as failed.
func TestReconcileSparesLiveCreates(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d := &listingDriver{ids: []string{"sbx_creating", "sbx_stuck", "sbx_running", "sbx_norecord", "sbx_stoppednow", "sbx_stoppedlong"}}
	m := New(d, st, rootFS{}, DefaultLimits(), nil)
	defer m.Close()
	const grace = 10 * time.Minute
	m.GateLeaderWork(0)
	m.SetReconcile(0, grace)
	now := time.Now().UTC().Truncate(time.Millisecond)
	m.now = func() time.Time { return now }

	insert := func(id, state string, created time.Time) {
		t.Helper()
		if err := st.InsertSandbox(ctx, store.Sandbox{ID: id, Template: "base", State: state, CPU: 1, MemoryMiB: 512, DiskMiB: 1024,
			CreatedAt: created, LeaseEndsAt: created.Add(time.Hour), Driver: "listing"}); err != nil {
			t.Fatal(err)
		}
	}
	insert("sbx_creating", store.StateStarting, now.Add(-time.Minute))
	insert("sbx_stuck", store.StateStarting, now.Add(-grace-time.Second))
	insert("sbx_running", store.StateRunning, now.Add(-time.Hour+time.Minute))
	insert("sbx_stoppednow", store.StateRunning, now.Add(-time.Minute))
	insert("sbx_stoppedlong", store.StateRunning, now.Add(-time.Minute))
	insert("sbx_vanished", store.StateRunning, now.Add(-time.Minute)) // its pod is not in the driver's list
	if err := st.MarkStopped(ctx, "sbx_stoppednow", EndDeleted, now.Add(-10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkStopped(ctx, "sbx_stoppedlong", EndDeleted, now.Add(-2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	destroyed := func() []string {
		d.mu.Lock()
		defer d.mu.Unlock()
		out := slices.Clone(d.destroyed)
		slices.Sort(out)
		return slices.Compact(out)
	}

	m.reconcileOnce(ctx)
	if got, want := destroyed(), []string{"sbx_stoppedlong", "sbx_stuck", "sbx_vanished"}; !slices.Equal(got, want) {
		t.Fatalf("first pass destroyed %v, want %v", got, want)
	}
	if sb, _ := st.GetSandbox(ctx, "sbx_stuck"); sb.State != store.StateStopped || sb.EndReason != EndFailed {
		t.Errorf("the stuck create: %s %s, want stopped failed", sb.State, sb.EndReason)
	}
	if sb, _ := st.GetSandbox(ctx, "sbx_vanished"); sb.State != store.StateStopped || sb.EndReason != EndFailed {
		t.Errorf("the running sandbox whose pod is gone: %s %s, want stopped failed", sb.State, sb.EndReason)
	}
	if sb, _ := st.GetSandbox(ctx, "sbx_creating"); sb.State != store.StateStarting {
		t.Errorf("the create under way: %s, want still starting", sb.State)
	}

	// Later, but within the grace of the first sighting: the pod with no
	// record stays.
	now = now.Add(grace - time.Second)
	m.reconcileOnce(ctx)
	if slices.Contains(destroyed(), "sbx_norecord") {
		t.Fatal("a pod with no record was destroyed before it had been seen so for the grace")
	}
	now = now.Add(2 * time.Second)
	m.reconcileOnce(ctx)
	if !slices.Contains(destroyed(), "sbx_norecord") {
		t.Fatal("a pod with no record for longer than the grace is still there")
	}
	for _, id := range []string{"sbx_running"} {
		if slices.Contains(destroyed(), id) {
			t.Errorf("%s (running) was destroyed", id)
		}
	}
}

// slowCreateDriver is listingDriver whose Create waits for release: a pod
// that takes long to start (an image pull on a real node).
type slowCreateDriver struct {
	listingDriver
	started chan string
	release chan struct{}
}

func (d *slowCreateDriver) Create(ctx context.Context, spec driver.Spec) (*driver.Handle, error) {
	d.started <- spec.ID
	<-d.release
	return d.listingDriver.Create(ctx, spec)
}

// TestReconcileSparesItsOwnSlowCreate: a create this server is running is
// never failed by its own leader work, however long past the grace it
// takes (a real node pulling an image took longer than a test's grace, and
// the leader failed its own create: the client got 500 "not found").
func TestReconcileSparesItsOwnSlowCreate(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d := &slowCreateDriver{started: make(chan string, 1), release: make(chan struct{})}
	m := New(d, st, rootFS{}, DefaultLimits(), nil)
	defer m.Close()
	const grace = 3 * time.Second
	m.GateLeaderWork(0)
	m.SetReconcile(0, grace)
	var mu sync.Mutex
	now := time.Now()
	m.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }

	type result struct {
		sb  store.Sandbox
		err error
	}
	done := make(chan result, 1)
	go func() {
		sb, err := m.Create(ctx, CreateParams{Template: "base"})
		done <- result{sb, err}
	}()
	id := <-d.started
	mu.Lock()
	now = now.Add(grace + time.Minute)
	mu.Unlock()
	m.reconcileOnce(ctx)
	if sb, _ := st.GetSandbox(ctx, id); sb.State != store.StateStarting {
		t.Fatalf("this server's own create under way, past the grace: %s %s, want still starting", sb.State, sb.EndReason)
	}
	close(d.release)
	r := <-done
	if r.err != nil || r.sb.State != store.StateRunning {
		t.Fatalf("the slow create: %+v %v, want running", r.sb, r.err)
	}
	// Once made, it is an ordinary running sandbox (its pod is listed).
	d.mu.Lock()
	d.ids = append(d.ids, id)
	d.mu.Unlock()
	m.reconcileOnce(ctx)
	if sb, _ := st.GetSandbox(ctx, id); sb.State != store.StateRunning {
		t.Fatalf("after the create: %s, want running", sb.State)
	}
}
