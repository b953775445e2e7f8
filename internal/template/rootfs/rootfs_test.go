package rootfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestReadFileStaysInRoot: a template's file that is a symlink to a host
// file is read as the sandbox would see it, never from the host.
func TestReadFileStaysInRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	host := filepath.Join(base, "host-secret")
	os.MkdirAll(filepath.Join(root, "etc/ssl/certs"), 0o755)
	os.WriteFile(host, []byte("HOST"), 0o600)
	os.Symlink(host, filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"))
	os.Symlink("../../../../../../"+host, filepath.Join(root, "etc/rel"))
	for _, name := range []string{"/etc/ssl/certs/ca-certificates.crt", "etc/rel"} {
		b, err := ReadFile(root, name, 1<<20)
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: got %q, %v; want not found (inside the root)", name, b, err)
		}
	}
	// The same names inside the root are what is read.
	os.MkdirAll(filepath.Join(root, filepath.Dir(host)), 0o755)
	os.WriteFile(filepath.Join(root, host), []byte("ROOT"), 0o644)
	if b, err := ReadFile(root, "/etc/ssl/certs/ca-certificates.crt", 1<<20); err != nil || string(b) != "ROOT" {
		t.Errorf("got %q, %v; want the root's own file", b, err)
	}
	if _, err := ReadFile(root, "../host-secret", 1<<20); err == nil {
		t.Error("a name with .. was read")
	}
}

func TestWriteFileReplacesSymlink(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	host := filepath.Join(base, "host")
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(host, []byte("HOST"), 0o644)
	os.Symlink(host, filepath.Join(root, "etc/passwd"))
	r, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.WriteFile("etc/passwd", Strict, []byte("new"), 0o644, os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(host); string(b) != "HOST" {
		t.Errorf("written through the symlink: host = %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(root, "etc/passwd")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("etc/passwd: %v %v", fi, err)
	}
	if _, err := r.OpenDir("etc/passwd/..", Strict); err == nil {
		t.Error("a name with .. was resolved")
	}
}
