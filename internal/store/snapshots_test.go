package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Snapshots: a name is unique per key, a snapshot is ready once its bytes
// are known, and its bytes count in its key's disk use.
func TestSnapshots(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		t0 := time.UnixMilli(1_800_000_000_000).UTC()
		mk := func(id, key, name string, at int) Snapshot {
			return Snapshot{ID: id, KeyID: key, Name: name, SourceID: "sbx_src", Template: "base", Mode: "full",
				State: SnapshotCreating, CPU: 1, MemoryMiB: 512, DiskMiB: 2048, Driver: "gvisor",
				CreatedAt: t0.Add(time.Duration(at) * time.Second)}
		}
		for _, sn := range []Snapshot{mk("snap_1", "key_a", "warm", 1), mk("snap_2", "key_a", "", 2),
			mk("snap_3", "key_a", "", 3), mk("snap_4", "key_b", "warm", 4)} {
			if err := st.InsertSnapshot(ctx, sn); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.InsertSnapshot(ctx, mk("snap_5", "key_a", "warm", 5)); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("a second snapshot named warm for key_a: %v, want ErrDuplicate", err)
		}
		if err := st.MarkSnapshotReady(ctx, "snap_1", 3<<20+1); err != nil {
			t.Fatal(err)
		}
		if err := st.MarkSnapshotReady(ctx, "snap_1", 5); !errors.Is(err, ErrNotFound) {
			t.Fatalf("ready twice: %v, want ErrNotFound", err)
		}
		got, err := st.SnapshotByName(ctx, "key_a", "warm")
		want := mk("snap_1", "key_a", "warm", 1)
		want.State, want.Bytes = SnapshotReady, 3<<20+1
		if err != nil || got != want {
			t.Fatalf("SnapshotByName = %+v %v, want %+v", got, err, want)
		}
		if _, err := st.SnapshotByName(ctx, "key_c", "warm"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another key's name: %v", err)
		}
		list, err := st.ListSnapshots(ctx, SnapshotFilter{KeyID: "key_a"})
		if err != nil || len(list) != 3 || list[0].ID != "snap_3" || list[2].ID != "snap_1" {
			t.Fatalf("ListSnapshots(key_a) = %+v %v, want snap_3, snap_2, snap_1", list, err)
		}
		if list, _ := st.ListSnapshots(ctx, SnapshotFilter{State: SnapshotReady}); len(list) != 1 {
			t.Fatalf("ready snapshots: %+v", list)
		}
		u, err := st.KeyUse(ctx, "key_a")
		if err != nil || u.SnapshotBytes != 3<<20+1 || u.QuotaDiskMiB() != 4 {
			t.Fatalf("KeyUse(key_a) = %+v (%d MiB) %v, want 3 MiB + 1 byte of snapshots, 4 MiB", u, u.QuotaDiskMiB(), err)
		}
		if err := st.DeleteSnapshot(ctx, "snap_1"); err != nil {
			t.Fatal(err)
		}
		if err := st.DeleteSnapshot(ctx, "snap_1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
		if _, err := st.GetSnapshot(ctx, "snap_1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get deleted: %v", err)
		}
		// The name is free again.
		if err := st.InsertSnapshot(ctx, mk("snap_6", "key_a", "warm", 6)); err != nil {
			t.Fatal(err)
		}
	})
}

// ExpiredSnapshots: ready snapshots whose expiry has come, oldest first;
// none without an expiry, none still creating; the expiry round-trips.
func TestExpiredSnapshots(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		st, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		t0 := time.UnixMilli(1_800_000_000_000).UTC()
		at := func(s int) *time.Time { x := t0.Add(time.Duration(s) * time.Second); return &x }
		for _, c := range []struct {
			id      string
			expires *time.Time
			ready   bool
		}{{"snap_a", at(10), true}, {"snap_b", at(5), true}, {"snap_c", nil, true}, {"snap_d", at(1), false}, {"snap_e", at(60), true}} {
			sn := Snapshot{ID: c.id, KeyID: "k", SourceID: "sbx", Template: "base", Mode: "filesystem", State: SnapshotCreating,
				CPU: 1, MemoryMiB: 256, DiskMiB: 512, Driver: "gvisor", CreatedAt: t0, ExpiresAt: c.expires}
			if err := st.InsertSnapshot(ctx, sn); err != nil {
				t.Fatal(err)
			}
			if c.ready {
				if err := st.MarkSnapshotReady(ctx, c.id, 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		got, err := st.ExpiredSnapshots(ctx, t0.Add(10*time.Second))
		if err != nil || len(got) != 2 || got[0].ID != "snap_b" || got[1].ID != "snap_a" || !got[1].ExpiresAt.Equal(*at(10)) {
			t.Fatalf("ExpiredSnapshots = %+v %v, want snap_b then snap_a", got, err)
		}
		if sn, _ := st.GetSnapshot(ctx, "snap_c"); sn.ExpiresAt != nil {
			t.Errorf("no expiry reads back as %v", sn.ExpiresAt)
		}
	})
}
