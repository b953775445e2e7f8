package sandbox

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// diskDriver is countingDriver on a host disk of avail of size bytes, whose
// creates take a while (so that admissions overlap).
type diskDriver struct {
	countingDriver
	avail, size int64
}

func (d *diskDriver) Create(ctx context.Context, spec driver.Spec) (*driver.Handle, error) {
	time.Sleep(20 * time.Millisecond)
	return d.countingDriver.Create(ctx, spec)
}
func (d *diskDriver) HostDisk() (int64, int64, error) { return d.avail, d.size, nil }
func (d *diskDriver) ImageEstimate(context.Context, string) (int64, error) {
	return 0, errors.New("not in this test")
}

func newQuotaManager(t *testing.T, d driver.Driver, l Limits) (*Manager, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := New(d, st, rootFS{}, l, nil)
	t.Cleanup(m.Close)
	return m, st
}

func addKey(t *testing.T, st *store.Store, id string, l store.KeyLimits) {
	t.Helper()
	if err := st.InsertKeyWithLimits(context.Background(), store.Key{ID: id, Name: id, Prefix: "wr_" + id, Hash: "h" + id, CreatedAt: time.Now()}, l); err != nil {
		t.Fatal(err)
	}
}

// createBurst sends n creates of diskMiB for key at once and returns how
// many succeeded and the errors of the others.
func createBurst(m *Manager, key string, n int, diskMiB int64) (ok int, failed []error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := m.Create(context.Background(), CreateParams{KeyID: key, DiskMiB: diskMiB})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				ok++
			} else {
				failed = append(failed, err)
			}
		}()
	}
	wg.Wait()
	return ok, failed
}

// A burst of creates at a key's quotas admits exactly what they allow:
// what is admitted and not yet in the store counts.
func TestQuotaBurst(t *testing.T) {
	d := &diskDriver{avail: 1 << 50, size: 1 << 50}
	m, st := newQuotaManager(t, d, DefaultLimits())
	addKey(t, st, "key_count", store.KeyLimits{DailyLimitMicros: 1, Quotas: store.KeyQuotas{Sandboxes: 5}})
	addKey(t, st, "key_disk", store.KeyLimits{DailyLimitMicros: 1, Quotas: store.KeyQuotas{DiskMiB: 1000}})
	ok, failed := createBurst(m, "key_count", 20, 16)
	if ok != 5 || len(failed) != 15 {
		t.Fatalf("20 creates at a sandboxes quota of 5: %d admitted, want 5 (%v)", ok, failed)
	}
	for _, err := range failed {
		if !errors.Is(err, errs.Quota) || !strings.Contains(err.Error(), "sandboxes quota") {
			t.Fatalf("refused create: %v, want errs.Quota naming the sandboxes quota", err)
		}
	}
	ok, failed = createBurst(m, "key_disk", 20, 100)
	if ok != 10 {
		t.Fatalf("20 creates of 100 MiB at a disk quota of 1000 MiB: %d admitted, want 10 (%v)", ok, failed)
	}
	for _, err := range failed {
		if !errors.Is(err, errs.DiskQuota) || !strings.Contains(err.Error(), "1000 MiB") {
			t.Fatalf("refused create: %v, want errs.DiskQuota naming 1000 MiB", err)
		}
	}
	if len(m.quota.pending) != 0 || m.quota.writing != 0 {
		t.Errorf("after the bursts the quota still holds %+v and %d bytes", m.quota.pending, m.quota.writing)
	}
}

// The server's defaults bind tenant keys that left a quota at 0, never an
// administrator's key (no daily limit) without quotas of its own.
func TestQuotaDefaults(t *testing.T) {
	l := DefaultLimits()
	l.KeyQuotas = store.KeyQuotas{Sandboxes: 2}
	m, st := newQuotaManager(t, &diskDriver{avail: 1 << 50, size: 1 << 50}, l)
	addKey(t, st, "key_tenant", store.KeyLimits{DailyLimitMicros: 1})
	addKey(t, st, "key_admin", store.KeyLimits{})
	addKey(t, st, "key_admin_quota", store.KeyLimits{Quotas: store.KeyQuotas{Sandboxes: 1}})
	addKey(t, st, "key_own", store.KeyLimits{DailyLimitMicros: 1, Quotas: store.KeyQuotas{Sandboxes: 3}})
	for _, c := range []struct {
		key  string
		want int
	}{{"key_tenant", 2}, {"key_admin", 6}, {"key_admin_quota", 1}, {"key_own", 3}} {
		if ok, _ := createBurst(m, c.key, 6, 16); ok != c.want {
			t.Errorf("%s: %d of 6 creates admitted, want %d", c.key, ok, c.want)
		}
	}
	if q := m.QuotasOf(store.KeyQuotas{DiskMiB: 5}, true); q != (store.KeyQuotas{DiskMiB: 5, Sandboxes: 2}) {
		t.Errorf("QuotasOf a tenant's own disk quota: %+v", q)
	}
}

// The host's disk admits a create while its free space less the reserve
// holds the sandbox's whole disk: the default reserve is the larger of
// 2 GiB and 5% of the filesystem.
func TestHostDiskReserve(t *testing.T) {
	d := &diskDriver{avail: 5 << 30, size: 100 << 30} // 5 GiB free of 100: a 5 GiB reserve
	m, _ := newQuotaManager(t, d, DefaultLimits())
	_, err := m.Create(context.Background(), CreateParams{DiskMiB: 16})
	if !errors.Is(err, errs.NoSpace) || !strings.Contains(err.Error(), "--disk-reserve-mib") {
		t.Fatalf("create with 5 GiB free and a 5 GiB reserve: %v, want errs.NoSpace naming the reserve", err)
	}
	d.avail = 7 << 30
	if _, err := m.Create(context.Background(), CreateParams{DiskMiB: 2048}); err != nil {
		t.Fatalf("2 GiB with 2 GiB to spare: %v", err)
	}
	if _, err := m.Create(context.Background(), CreateParams{DiskMiB: 2049}); !errors.Is(err, errs.NoSpace) {
		t.Fatalf("2049 MiB with 2048 MiB to spare: %v, want errs.NoSpace", err)
	}
	d.size = 10 << 30 // 5% is 512 MiB: the 2 GiB floor holds
	if got := m.diskReserve(d.size); got != 2<<30 {
		t.Errorf("reserve of a 10 GiB filesystem: %d MiB, want 2048", got>>20)
	}
	m.limits.DiskReserveMiB = -1
	if got := m.diskReserve(d.size); got != 0 {
		t.Errorf("reserve -1: %d, want none", got)
	}
}
