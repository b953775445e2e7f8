package sandbox

import (
	"context"
	"errors"
	"testing"

	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/store"
)

// A driver that keeps no volumes (Kubernetes) refuses every volume route
// and a create that mounts one with errs.NotImplemented (501), before
// anything is made.
func TestVolumesUnsupported(t *testing.T) {
	d := &diskDriver{avail: 1 << 50, size: 1 << 50}
	m, st := newQuotaManager(t, d, DefaultLimits())
	addKey(t, st, "key_v", store.KeyLimits{})
	ctx := context.Background()
	_, err := m.CreateVolume(ctx, "key_v", "data", 64)
	_, lerr := m.ListVolumes(ctx, "key_v")
	derr := m.DeleteVolume(ctx, "key_v", "data")
	_, cerr := m.Create(ctx, CreateParams{KeyID: "key_v", Volumes: []VolumeRequest{{Name: "data", Path: "/data"}}})
	for _, e := range []error{err, lerr, derr, cerr} {
		if !errors.Is(e, errs.NotImplemented) {
			t.Errorf("on a driver without volumes: %v, want errs.NotImplemented", e)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.creates != 0 {
		t.Errorf("%d sandboxes were made", d.creates)
	}
}

func TestCheckVolumePath(t *testing.T) {
	for _, p := range []string{"/data", "/workspace/cache", "/home/user/.cache", "/mnt/a b", "/procfs", "/etcetera"} {
		if err := checkVolumePath(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for _, p := range []string{"", "data", "/", "/data/", "/a/../b", "/a//b", "/./a", "/proc", "/proc/x", "/sys/fs", "/dev/shm", "/run/withruntime",
		"/tmp", "/tmp/x", "/etc", "/etc/ssl", "/a\x00b"} {
		if err := checkVolumePath(p); !errors.Is(err, errs.Invalid) {
			t.Errorf("%q: %v, want errs.Invalid", p, err)
		}
	}
	for _, n := range []string{"", "-x", ".x", "a/b", "a b", "a:b", string(make([]byte, 64))} {
		if err := CheckVolumeName(n); !errors.Is(err, errs.Invalid) {
			t.Errorf("name %q: %v, want errs.Invalid", n, err)
		}
	}
}
