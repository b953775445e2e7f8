package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/internal/template"
)

// A warm image's name changes with what the image holds: the template's
// root (a rebuilt one is a new directory), its start, the network; and
// only with those.
func TestWarmName(t *testing.T) {
	m := &Manager{limits: DefaultLimits()}
	root := filepath.Join(t.TempDir(), "rootfs")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	st := &template.Start{Command: "python3 -m http.server 8000", ReadyCommand: "curl -sf localhost:8000"}
	a := m.warmName("web", root, st, true)
	if a != m.warmName("web", root, &template.Start{Command: st.Command, ReadyCommand: st.ReadyCommand}, true) {
		t.Error("the same template and start gave two names")
	}
	other := *st
	other.ReadyTimeoutSeconds = 5
	for what, b := range map[string]string{
		"another template": m.warmName("web2", root, st, true),
		"another start":    m.warmName("web", root, &other, true),
		"no network":       m.warmName("web", root, st, false),
	} {
		if b == a {
			t.Errorf("%s: the same name %s", what, a)
		}
	}
	// Rebuilt: the same path, a new directory.
	if err := os.Rename(root, root+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if m.warmName("web", root, st, true) == a {
		t.Error("a rebuilt template kept its warm image's name")
	}
	l := DefaultLimits()
	l.DefaultMemoryMiB *= 2
	if m2 := (&Manager{limits: l}); m2.warmName("web", root, st, true) == m.warmName("web", root, st, true) {
		t.Error("another default memory size kept the name")
	}
}

// No snapshot route sees a warm image, an administrator's included.
func TestWarmImagesHidden(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := New(&countingDriver{}, st, rootFS{}, DefaultLimits(), nil)
	defer m.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, sn := range []store.Snapshot{
		{ID: "snap_warm", KeyID: "", Name: warmNamePrefix + "0123", Template: "web", Mode: SnapshotFull, State: store.SnapshotReady, Driver: "counting", CreatedAt: now},
		// A private template's, held by its owner.
		{ID: "snap_warmprivate", KeyID: "key_a", Name: warmNamePrefix + "4567", Template: "mine", Mode: SnapshotFull, State: store.SnapshotReady, Driver: "counting", CreatedAt: now},
		{ID: "snap_mine", KeyID: "key_a", Name: "mine", Template: "base", Mode: SnapshotFull, State: store.SnapshotReady, Driver: "counting", CreatedAt: now},
	} {
		if err := st.InsertSnapshot(ctx, sn); err != nil {
			t.Fatal(err)
		}
	}
	for _, scope := range []SnapshotScope{{KeyID: "key_a", Tenant: true}, {KeyID: "key_admin"}, {KeyID: ""}} {
		list, err := m.ListSnapshots(ctx, scope, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, sn := range list {
			if isWarm(sn) {
				t.Errorf("%+v lists the warm image %s", scope, sn.ID)
			}
		}
		for _, ref := range []string{"snap_warm", warmNamePrefix + "0123", "snap_warmprivate", warmNamePrefix + "4567"} {
			if _, err := m.GetSnapshot(ctx, scope, ref); !errors.Is(err, errs.NotFound) {
				t.Errorf("%+v gets %s: %v", scope, ref, err)
			}
			if err := m.DeleteSnapshot(ctx, scope, ref); !errors.Is(err, errs.NotFound) {
				t.Errorf("%+v deletes %s: %v", scope, ref, err)
			}
		}
	}
	if _, err := st.GetSnapshot(ctx, "snap_warm"); err != nil {
		t.Errorf("the warm image's record: %v", err)
	}
	if list, _ := m.ListSnapshots(ctx, SnapshotScope{KeyID: "key_a", Tenant: true}, ""); len(list) != 1 || list[0].ID != "snap_mine" {
		t.Errorf("the owner's snapshots: %+v, want its own one", list)
	}
	// A caller cannot name a snapshot as a warm image is named.
	if err := checkSnapshotParams(&SnapshotParams{Name: warmNamePrefix + "0123"}); !errors.Is(err, errs.Invalid) {
		t.Errorf("a snapshot named like a warm image: %v", err)
	}
}
