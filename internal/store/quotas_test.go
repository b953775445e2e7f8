package store

import (
	"context"
	"testing"
	"time"
)

func TestKeyQuotas(t *testing.T) { eachBackend(t, testKeyQuotas) }

// A key's quotas are stored with it in one transaction, read back, listed
// and cleared; KeyUse sums what its sandboxes that are not stopped hold.
func testKeyQuotas(t *testing.T, dsn string) {
	ctx := context.Background()
	st, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	q := KeyQuotas{DiskMiB: 4096, PausedSandboxes: 2, Sandboxes: 3}
	if err := st.InsertKeyWithLimits(ctx, Key{ID: "key_q", Name: "q", Prefix: "wr_q", Hash: "hq", CreatedAt: t0},
		KeyLimits{DailyLimitMicros: 5, Quotas: q}); err != nil {
		t.Fatal(err)
	}
	if err := st.InsertKey(ctx, Key{ID: "key_n", Name: "n", Prefix: "wr_n", Hash: "hn", CreatedAt: t0}, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetKeyQuotas(ctx, "key_q"); err != nil || got != q {
		t.Errorf("GetKeyQuotas = %+v %v, want %+v", got, err, q)
	}
	if got, err := st.GetKeyQuotas(ctx, "key_n"); err != nil || !got.IsZero() {
		t.Errorf("GetKeyQuotas of a key without quotas = %+v %v", got, err)
	}
	if l, _ := st.KeyDailyLimit(ctx, "key_q"); l != 5 {
		t.Errorf("daily limit %d, want 5", l)
	}
	// A failed insert (same hash) leaves no quotas behind.
	if err := st.InsertKeyWithLimits(ctx, Key{ID: "key_dup", Name: "d", Hash: "hq", CreatedAt: t0},
		KeyLimits{Quotas: KeyQuotas{Sandboxes: 1}}); err == nil {
		t.Error("a second key with the same hash was inserted")
	}
	all, err := st.AllKeyQuotas(ctx)
	if err != nil || len(all) != 1 || all["key_q"] != q {
		t.Errorf("AllKeyQuotas = %+v %v", all, err)
	}
	if err := st.SetKeyQuotas(ctx, "key_n", KeyQuotas{Sandboxes: 7}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetKeyQuotas(ctx, "key_n", KeyQuotas{Sandboxes: 8}); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetKeyQuotas(ctx, "key_n"); got.Sandboxes != 8 {
		t.Errorf("after SetKeyQuotas twice: %+v", got)
	}
	if err := st.SetKeyQuotas(ctx, "key_n", KeyQuotas{}); err != nil {
		t.Fatal(err)
	}
	if all, _ := st.AllKeyQuotas(ctx); len(all) != 1 {
		t.Errorf("quotas after clearing key_n: %+v", all)
	}

	if u, err := st.KeyUse(ctx, "key_q"); err != nil || u != (KeyUse{}) {
		t.Errorf("KeyUse of a key without sandboxes = %+v %v", u, err)
	}
	for i, s := range []struct {
		id, key, state string
		disk, image    int64
	}{
		{"sbx_1", "key_q", StateStarting, 100, 0},
		{"sbx_2", "key_q", StateRunning, 200, 0},
		{"sbx_3", "key_q", StatePaused, 300, 3<<20 + 1},
		{"sbx_4", "key_q", StateStopped, 400, 0},
		{"sbx_5", "key_n", StateRunning, 500, 0},
	} {
		sb := Sandbox{ID: s.id, KeyID: s.key, Template: "base", State: StateStarting, CPU: 1, MemoryMiB: 64,
			DiskMiB: s.disk, CreatedAt: t0.Add(time.Duration(i) * time.Second), LeaseEndsAt: t0.Add(time.Hour), Driver: "fake"}
		if err := st.InsertSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		switch s.state {
		case StateRunning:
			err = st.MarkRunning(ctx, s.id, nil)
		case StatePaused:
			if err = st.MarkRunning(ctx, s.id, nil); err == nil {
				err = st.MarkPaused(ctx, s.id, t0, s.image, "")
			}
		case StateStopped:
			err = st.MarkStopped(ctx, s.id, "deleted", t0)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	u, err := st.KeyUse(ctx, "key_q")
	want := KeyUse{Sandboxes: 3, Paused: 1, DiskMiB: 600, ImageBytes: 3<<20 + 1}
	if err != nil || u != want {
		t.Errorf("KeyUse = %+v %v, want %+v", u, err, want)
	}
	if got := u.QuotaDiskMiB(); got != 604 {
		t.Errorf("QuotaDiskMiB = %d, want 604 (600 MiB of disks and 3 MiB + 1 byte of image, rounded up)", got)
	}
}
