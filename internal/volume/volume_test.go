package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func newHost(t *testing.T) *Host {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("volumes need root (loop devices, mounts)")
	}
	h, err := New(filepath.Join(t.TempDir(), "volumes"), 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// TestVolumeLifecycle: a volume is made, holds files owned as asked,
// stops writes at its size with ENOSPC, survives an unmount (a server's
// Close) and is removed without a trace.
func TestVolumeLifecycle(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	const id = "vol_test1"
	if err := h.Create(ctx, id, 32<<20); err != nil {
		t.Fatal(err)
	}
	data := h.DataDir(id)
	var st unix.Stat_t
	if err := unix.Stat(data, &st); err != nil || st.Uid != 1000 || st.Gid != 1000 {
		t.Fatalf("data directory: %+v %v, want owned by 1000:1000", st, err)
	}
	if err := os.WriteFile(filepath.Join(data, "a"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The quota: a file larger than the volume stops with ENOSPC.
	f, err := os.Create(filepath.Join(data, "big"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	var werr error
	for i := 0; i < 64 && werr == nil; i++ {
		_, werr = f.Write(buf)
	}
	f.Close()
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("writing 64 MiB to a 32 MiB volume: %v, want ENOSPC", werr)
	}
	used, capacity, err := h.Usage(ctx, id)
	if err != nil || used < 20<<20 || capacity > 32<<20 {
		t.Fatalf("usage: %d of %d (%v)", used, capacity, err)
	}
	os.Remove(filepath.Join(data, "big"))
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if isMount(t, h.mnt(id)) {
		t.Fatal("still mounted after Close")
	}
	got, err := os.ReadFile(filepath.Join(mustMount(t, h, id), "a"))
	if err != nil || string(got) != "kept" {
		t.Fatalf("after a remount: %q %v", got, err)
	}
	if err := h.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h.volDir(id)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("volume directory after Remove: %v", err)
	}
	if dev, _ := attachedLoop(filepath.Join(h.volDir(id), imageName)); dev != "" {
		t.Fatalf("loop device %s left", dev)
	}
}

// TestVolumeSharedLoop: while another mount of the volume's loop device
// lives (a sandbox's gofer after the server closed), mounting it again
// reuses that device, so the filesystem is never mounted twice.
func TestVolumeSharedLoop(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	const id = "vol_test2"
	if err := h.Create(ctx, id, 32<<20); err != nil {
		t.Fatal(err)
	}
	defer h.Remove(ctx, id)
	other := t.TempDir()
	if err := unix.Mount(h.mnt(id), other, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(other, unix.MNT_DETACH)
	devBefore, _ := attachedLoop(h.image(id))
	h.Close()
	if err := os.WriteFile(filepath.Join(other, DataName, "b"), []byte("via other"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := mustMount(t, h, id)
	if dev, _ := attachedLoop(h.image(id)); dev != devBefore {
		t.Fatalf("mounted through %s, the live mount is on %s", dev, devBefore)
	}
	if got, err := os.ReadFile(filepath.Join(data, "b")); err != nil || string(got) != "via other" {
		t.Fatalf("a write through the other mount: %q %v", got, err)
	}
}

// TestVolumeCorrupt: an image whose filesystem is damaged is reported,
// never mounted.
func TestVolumeCorrupt(t *testing.T) {
	h := newHost(t)
	ctx := context.Background()
	const id = "vol_test3"
	if err := h.Create(ctx, id, 32<<20); err != nil {
		t.Fatal(err)
	}
	defer h.Remove(ctx, id)
	h.Close()
	f, err := os.OpenFile(h.image(id), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Zero the first block group's descriptors and inode bitmap area.
	if _, err := f.WriteAt(make([]byte, 64<<10), 4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = h.Mount(ctx, id)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("mount of a damaged volume: %v, want ErrCorrupt", err)
	}
	t.Log(err)
	if isMount(t, h.mnt(id)) {
		t.Fatal("a damaged volume was mounted")
	}
}

func TestVolumeBadID(t *testing.T) {
	h := newHost(t)
	for _, id := range []string{"", "../x", "a/b", "A", ".."} {
		if err := h.Create(context.Background(), id, 32<<20); err == nil {
			t.Errorf("Create(%q) succeeded", id)
		}
	}
}

func mustMount(t *testing.T, h *Host, id string) string {
	t.Helper()
	data, err := h.Mount(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func isMount(t *testing.T, p string) bool {
	t.Helper()
	var a, b unix.Stat_t
	if err := unix.Lstat(p, &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lstat(filepath.Dir(p), &b); err != nil {
		t.Fatal(err)
	}
	return a.Dev != b.Dev
}
