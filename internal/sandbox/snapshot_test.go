package sandbox

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// A driver without snapshots (Kubernetes) answers every snapshot route
// with errs.NotImplemented (501) naming the missing capability, before
// anything else is looked at.
func TestSnapshotsNotImplemented(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := New(&countingDriver{}, st, rootFS{}, DefaultLimits(), nil)
	defer m.Close()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, errs.NotImplemented) || !strings.Contains(err.Error(), "cannot take snapshots") {
			t.Errorf("%s: %v, want NotImplemented naming the capability", what, err)
		}
	}
	_, err = m.Snapshot(ctx, "sbx_any", SnapshotParams{KeyID: "k"})
	check("Snapshot", err)
	_, err = m.Snapshot(ctx, "sbx_any", SnapshotParams{KeyID: "k", Mode: SnapshotFilesystem})
	check("Snapshot of files", err)
	_, err = m.Fork(ctx, "sbx_any", ForkParams{Count: 2, Create: CreateParams{KeyID: "k"}})
	check("Fork", err)
	_, err = m.Create(ctx, CreateParams{KeyID: "k", Snapshot: "snap_x"})
	check("Create from a snapshot", err)
}

// checkSnapshotParams: the mode's default and refusals, names.
func TestCheckSnapshotParams(t *testing.T) {
	p := SnapshotParams{}
	if err := checkSnapshotParams(&p); err != nil || p.Mode != SnapshotFull {
		t.Errorf("defaults: %+v %v", p, err)
	}
	for _, c := range []struct {
		p    SnapshotParams
		kind error
	}{
		{SnapshotParams{Mode: "memory"}, errs.Invalid},
		{SnapshotParams{Name: "Warm"}, errs.Invalid},
		{SnapshotParams{Name: "-x"}, errs.Invalid},
		{SnapshotParams{Name: "snap_abc"}, errs.Invalid},
		{SnapshotParams{Name: strings.Repeat("a", 64)}, errs.Invalid},
	} {
		if err := checkSnapshotParams(&c.p); !errors.Is(err, c.kind) {
			t.Errorf("%+v: %v, want %v", c.p, err, c.kind)
		}
	}
	if err := checkSnapshotParams(&SnapshotParams{Mode: SnapshotFilesystem}); err != nil {
		t.Errorf("mode filesystem: %v", err)
	}
	if err := checkSnapshotParams(&SnapshotParams{Name: "warm-python.3_12"}); err != nil {
		t.Errorf("a good name: %v", err)
	}
}
