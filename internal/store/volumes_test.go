package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestVolumes(t *testing.T) { eachBackend(t, testVolumes) }

// Volumes are named per key; a sandbox's create records its mounts only
// while each volume is ready and its key's; a delete is refused, naming
// them, while a sandbox that is not stopped mounts it; sizes count in the
// key's use.
func testVolumes(t *testing.T, dsn string) {
	ctx := context.Background()
	st, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	a := Volume{ID: "vol_a", KeyID: "key_1", Name: "data", SizeMiB: 64, State: VolumeCreating, CreatedAt: t0, Driver: "gvisor"}
	if err := st.InsertVolume(ctx, a); err != nil {
		t.Fatal(err)
	}
	dup := a
	dup.ID = "vol_dup"
	if err := st.InsertVolume(ctx, dup); !errors.Is(err, ErrNameTaken) {
		t.Fatalf("a second volume of one name for one key: %v, want ErrNameTaken", err)
	}
	other := a
	other.ID, other.KeyID = "vol_b", "key_2"
	if err := st.InsertVolume(ctx, other); err != nil {
		t.Fatalf("another key's volume of the same name: %v", err)
	}
	sb := Sandbox{ID: "sbx_1", KeyID: "key_1", State: StateStarting, CreatedAt: t0, LeaseEndsAt: t0.Add(time.Hour),
		Volumes: []SandboxVolume{{VolumeID: "vol_a", Name: "data", Path: "/data", ReadOnly: true}}}
	if err := st.InsertSandbox(ctx, sb); !errors.Is(err, ErrVolumeGone) {
		t.Fatalf("a sandbox mounting a volume still being made: %v, want ErrVolumeGone", err)
	}
	if _, err := st.GetSandbox(ctx, "sbx_1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the refused sandbox was recorded: %v", err)
	}
	if err := st.MarkVolumeReady(ctx, "vol_a"); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkVolumeReady(ctx, "vol_b"); err != nil {
		t.Fatal(err)
	}
	// Another key's volume is never mounted, whatever its id.
	stolen := sb
	stolen.ID, stolen.Volumes = "sbx_x", []SandboxVolume{{VolumeID: "vol_b", Path: "/x"}}
	if err := st.InsertSandbox(ctx, stolen); !errors.Is(err, ErrVolumeGone) {
		t.Fatalf("a sandbox mounting another key's volume: %v, want ErrVolumeGone", err)
	}
	if err := st.InsertSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	mounts, err := st.SandboxVolumes(ctx, []string{"sbx_1", "sbx_none"})
	if err != nil || len(mounts) != 1 || len(mounts["sbx_1"]) != 1 {
		t.Fatalf("SandboxVolumes = %+v %v", mounts, err)
	}
	if m := mounts["sbx_1"][0]; m.Name != "data" || m.Path != "/data" || !m.ReadOnly || m.VolumeID != "vol_a" {
		t.Fatalf("mount = %+v", m)
	}
	if ids, err := st.StartDeleteVolume(ctx, "vol_a"); err != nil || !slices.Equal(ids, []string{"sbx_1"}) {
		t.Fatalf("delete while mounted: %v %v, want refused naming sbx_1", ids, err)
	}
	if v, _ := st.GetVolume(ctx, "vol_a"); v.State != VolumeReady {
		t.Fatalf("a refused delete left the volume %s", v.State)
	}
	use, err := st.KeyUse(ctx, "key_1")
	if err != nil || use.VolumesMiB != 64 || use.QuotaDiskMiB() != 64 {
		t.Fatalf("KeyUse = %+v %v, want 64 MiB of volumes", use, err)
	}
	if err := st.MarkStopped(ctx, "sbx_1", "deleted", t0); err != nil {
		t.Fatal(err)
	}
	if ids, err := st.StartDeleteVolume(ctx, "vol_a"); err != nil || len(ids) != 0 {
		t.Fatalf("delete once the sandbox stopped: %v %v", ids, err)
	}
	// Deleting: no create mounts it any more.
	sb2 := sb
	sb2.ID = "sbx_2"
	if err := st.InsertSandbox(ctx, sb2); !errors.Is(err, ErrVolumeGone) {
		t.Fatalf("a sandbox mounting a volume being deleted: %v, want ErrVolumeGone", err)
	}
	if err := st.DeleteVolumeRecord(ctx, "vol_a"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetVolumeByName(ctx, "key_1", "data"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if l, err := st.ListVolumes(ctx, ""); err != nil || len(l) != 1 || l[0].ID != "vol_b" {
		t.Fatalf("ListVolumes = %+v %v", l, err)
	}
	if m, _ := st.SandboxVolumes(ctx, []string{"sbx_1"}); len(m) != 0 {
		t.Fatalf("mount rows of a deleted volume: %+v", m)
	}
}
