package itest

import (
	"context"
	"errors"
	"testing"

	withruntime "withruntime.dev/runtime/sdk/go"
)

// TestSDKSnapshotFork: the Go SDK takes a named snapshot, creates from it
// by name, forks, lists and deletes, with the SDK's errors.
func TestSDKSnapshotFork(t *testing.T) {
	e := newEnv(t)
	c := e.sdkClient()
	ctx := context.Background()
	sb, err := c.Create(ctx, withruntime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if _, err := sb.Exec(ctx, withruntime.ExecRequest{Command: "echo from-source > /workspace/f"}); err != nil {
		t.Fatal(err)
	}
	sn, err := sb.Snapshot(ctx, withruntime.SnapshotOptions{Name: "sdk"})
	if err != nil || sn.Name != "sdk" || sn.Bytes <= 0 {
		t.Fatalf("Snapshot: %+v %v", sn, err)
	}
	if _, err := sb.Snapshot(ctx, withruntime.SnapshotOptions{Name: "sdk"}); !errors.Is(err, withruntime.ErrConflict) {
		t.Errorf("a second snapshot of the name: %v, want ErrConflict", err)
	}
	if fsn, err := sb.Snapshot(ctx, withruntime.SnapshotOptions{Mode: "filesystem"}); err != nil || fsn.Mode != "filesystem" {
		t.Errorf("mode filesystem: %+v %v", fsn, err)
	} else if err := c.DeleteSnapshot(ctx, fsn.ID); err != nil {
		t.Errorf("delete the files-only snapshot: %v", err)
	}
	copy1, err := c.Create(ctx, withruntime.Options{Snapshot: "sdk"})
	if err != nil {
		t.Fatal(err)
	}
	defer copy1.Close()
	if res, err := copy1.Exec(ctx, withruntime.ExecRequest{Command: "cat /workspace/f"}); err != nil || res.Stdout != "from-source\n" {
		t.Errorf("the copy: %+v %v", res, err)
	}
	fr, err := sb.Fork(ctx, 2, withruntime.ForkOptions{Env: map[string]string{"N": "x"}})
	if err != nil || fr.Err() != nil || len(fr.Sandboxes) != 2 || fr.SnapshotKept {
		t.Fatalf("Fork: %+v %v", fr, err)
	}
	for _, f := range fr.Sandboxes {
		if res, err := f.Exec(ctx, withruntime.ExecRequest{Command: "cat /workspace/f; echo $N"}); err != nil || res.Stdout != "from-source\nx\n" {
			t.Errorf("fork %s: %+v %v", f.ID(), res, err)
		}
		f.Close()
	}
	list, err := c.Snapshots(ctx)
	if err != nil || len(list) != 1 || list[0].ID != sn.ID {
		t.Errorf("Snapshots: %+v %v", list, err)
	}
	if got, err := c.Snapshot(ctx, "sdk"); err != nil || got.ID != sn.ID {
		t.Errorf("Snapshot(sdk): %+v %v", got, err)
	}
	if err := c.DeleteSnapshot(ctx, "sdk"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Snapshot(ctx, sn.ID); !errors.Is(err, withruntime.ErrNotFound) {
		t.Errorf("a deleted snapshot: %v, want ErrNotFound", err)
	}
}
