package gvisor

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bind makes a listening unix socket at path (closed with the test).
func bind(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	t.Cleanup(func() { l.Close() })
}

func shortDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "pz")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// boundSocket finds a socket root made in the socket directory, also in a
// subdirectory, but never follows a link out of it: a link to a directory
// of host sockets, or named like the agent's socket, is not a socket there.
func TestBoundSocket(t *testing.T) {
	dir, outside := shortDir(t), shortDir(t)
	bind(t, filepath.Join(dir, socketName))
	bind(t, filepath.Join(outside, "host.sock"))
	if err := os.Symlink(outside, filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "host.sock"), filepath.Join(dir, "sock-link")); err != nil {
		t.Fatal(err)
	}
	if got, err := boundSocket(dir); err != nil || got != "" {
		t.Fatalf("only the agent's socket and links: got %q, %v; want none", got, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o700); err != nil {
		t.Fatal(err)
	}
	bind(t, filepath.Join(dir, "a", "b", "evil.sock"))
	if got, err := boundSocket(dir); err != nil || got != "a/b/evil.sock" {
		t.Fatalf("a socket root bound in a subdirectory: got %q, %v", got, err)
	}
	// The directory itself replaced by a link is refused, not followed.
	link := filepath.Join(shortDir(t), "sock")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if _, err := boundSocket(link); err == nil {
		t.Fatal("a socket directory that is a link was walked")
	}
}

// removeEntry removes what root put under the agent's socket name — a link
// to a host file among others — and never what it points to.
func TestRemoveEntry(t *testing.T) {
	dir, outside := shortDir(t), shortDir(t)
	target := filepath.Join(outside, "precious")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, plant := range []func(string) error{
		func(p string) error { return os.Symlink(target, p) },
		func(p string) error { return os.Symlink(outside, p) },
		func(p string) error { return os.WriteFile(p, nil, 0o600) },
		func(p string) error { return os.Mkdir(p, 0o700) },
	} {
		p := filepath.Join(dir, socketName)
		if err := plant(p); err != nil {
			t.Fatal(err)
		}
		if err := removeEntry(dir, socketName); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Fatalf("%s still there: %v", p, err)
		}
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "keep" {
		t.Fatalf("the link's target: %q %v", b, err)
	}
	if err := removeEntry(dir, socketName); err != nil {
		t.Fatalf("a missing entry: %v", err)
	}
}

// restoreFlags keeps the source's flags and disk size, and moves the
// writable layer's file into the new sandbox's directory.
func TestRestoreFlags(t *testing.T) {
	meta := &snapshotMeta{ID: "snap_a", Flags: []string{"--network=none", "--host-uds=create",
		"--overlay2=root:dir=/data/gvisor/sandboxes/sbx_src,size=1073741824", "--platform=systrap"}}
	got, err := restoreFlags(meta, "/data/gvisor/sandboxes/sbx_new")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--network=none", "--host-uds=create",
		"--overlay2=root:dir=/data/gvisor/sandboxes/sbx_new,size=1073741824", "--platform=systrap"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("restoreFlags = %q, want %q", got, want)
	}
	meta.Flags[2] = "--overlay2=root:memory,size=5"
	if got, _ := restoreFlags(meta, "/x"); got[2] != "--overlay2=root:memory,size=5" {
		t.Fatalf("a memory-backed disk: %q", got[2])
	}
	meta.Flags = meta.Flags[:2]
	if _, err := restoreFlags(meta, "/x"); err == nil {
		t.Fatal("flags without --overlay2 were taken")
	}
	for id, ok := range map[string]bool{"snap_abc-1": true, "": false, "../x": false, "a/b": false, ".new-x": false, "A": false} {
		if validSnapshotID(id) != ok {
			t.Errorf("validSnapshotID(%q) = %v", id, !ok)
		}
	}
}
