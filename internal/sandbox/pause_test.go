package sandbox

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/store"
)

// failingResumer is countingDriver with a Pauser whose resume always fails.
type failingResumer struct{ countingDriver }

func (d *failingResumer) Pause(context.Context, string, []byte, func(driver.Image) error) error {
	return errors.New("not in this test")
}
func (d *failingResumer) Resume(context.Context, string, []byte, *driver.Network, func(*driver.Handle) error) (*driver.Handle, error) {
	return nil, errors.New("the restored agent did not take its lease")
}
func (d *failingResumer) RecoverPaused(context.Context, string) (driver.Image, error) {
	return driver.Image{}, driver.ErrNotFound
}

// TestFailedResumeStopsTheSandbox: a resume that fails destroys the
// sandbox and answers, rather than waiting for ever on the lock the resume
// itself holds (seen in CI under load: the request and every later one on
// that sandbox hung).
func TestFailedResumeStopsTheSandbox(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d := &failingResumer{}
	m := New(d, st, rootFS{}, DefaultLimits(), nil)
	defer m.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	const id = "sbx_paused"
	if err := st.InsertSandbox(ctx, store.Sandbox{ID: id, Template: "base", State: store.StateStarting, CPU: 1, MemoryMiB: 512,
		DiskMiB: 1024, CreatedAt: now, LeaseEndsAt: now.Add(time.Hour), Driver: "counting"}); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkRunning(ctx, id, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkPaused(ctx, id, now, 1<<20, ""); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.Resume(ctx, id, 0)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a failed resume succeeded")
		}
		t.Logf("resume: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("a failed resume did not answer within 10 s")
	}
	sb, err := st.GetSandbox(ctx, id)
	if err != nil || sb.State != store.StateStopped {
		t.Fatalf("after a failed resume the sandbox is %q (%v), want stopped", sb.State, err)
	}
	// The lock is free again: a later stop answers too.
	stopped := make(chan error, 1)
	go func() { stopped <- m.stopAt(ctx, id, EndDeleted, time.Time{}) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("a stop after the failed resume did not answer")
	}
}
