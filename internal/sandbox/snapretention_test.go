package sandbox

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/store"
)

// imageDriver is a countingDriver that keeps snapshot images as names.
type imageDriver struct {
	countingDriver
	imu     sync.Mutex
	images  []string
	deleted []string
}

func (d *imageDriver) Snapshot(context.Context, string, []byte, string) (driver.Image, error) {
	return driver.Image{}, errors.New("not in this test")
}

func (d *imageDriver) Restore(context.Context, driver.Spec, string) (*driver.Handle, error) {
	return nil, errors.New("not in this test")
}

func (d *imageDriver) DeleteSnapshot(_ context.Context, id string) error {
	d.imu.Lock()
	defer d.imu.Unlock()
	d.deleted = append(d.deleted, id)
	return nil
}

func (d *imageDriver) ListSnapshots(context.Context) ([]string, error) {
	d.imu.Lock()
	defer d.imu.Unlock()
	return slices.Clone(d.images), nil
}

// Retention: a snapshot past its ExpiresAt is deleted by the sweep (its
// record and its image); one not yet expired, one with no expiry and one
// still being taken are kept.
func TestExpireSnapshots(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d := &imageDriver{}
	m := New(d, st, rootFS{}, DefaultLimits(), nil)
	defer m.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	m.now = func() time.Time { return now }
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	for _, c := range []struct {
		id      string
		expires *time.Time
		ready   bool
	}{{"snap_gone", at(-time.Second), true}, {"snap_now", at(0), true}, {"snap_later", at(time.Hour), true},
		{"snap_kept", nil, true}, {"snap_taking", at(-time.Hour), false}} {
		sn := store.Snapshot{ID: c.id, KeyID: "k", SourceID: "sbx", Template: "base", Mode: SnapshotFull,
			State: store.SnapshotCreating, CPU: 1, MemoryMiB: 256, DiskMiB: 512, Driver: d.Name(), CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: c.expires}
		if err := st.InsertSnapshot(ctx, sn); err != nil {
			t.Fatal(err)
		}
		if c.ready {
			if err := st.MarkSnapshotReady(ctx, c.id, 1<<20); err != nil {
				t.Fatal(err)
			}
		}
	}
	m.expireSnapshots(ctx)
	slices.Sort(d.deleted)
	if !slices.Equal(d.deleted, []string{"snap_gone", "snap_now"}) {
		t.Errorf("images deleted: %v, want snap_gone and snap_now", d.deleted)
	}
	left, _ := st.ListSnapshots(ctx, store.SnapshotFilter{})
	var ids []string
	for _, sn := range left {
		ids = append(ids, sn.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"snap_kept", "snap_later", "snap_taking"}) {
		t.Errorf("records left: %v", ids)
	}
}
