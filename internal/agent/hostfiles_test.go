package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLinkHostFiles: each file the host dir holds replaces the template's
// (a file, a symlink elsewhere, or nothing with no parent directory), a
// file the host dir lacks is left alone, and a second call changes nothing.
func TestLinkHostFiles(t *testing.T) {
	root := t.TempDir()
	host := filepath.Join(root, "host")
	if err := os.MkdirAll(host, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"hosts", "resolv.conf", "ca-certificates.crt"} {
		if err := os.WriteFile(filepath.Join(host, n), []byte("host "+n+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	etc := filepath.Join(root, "etc")
	_ = os.MkdirAll(etc, 0o755)
	_ = os.WriteFile(filepath.Join(etc, "hosts"), []byte("template hosts\n"), 0o644)
	_ = os.Symlink("../run/systemd/resolve/stub-resolv.conf", filepath.Join(etc, "resolv.conf"))
	saved := hostFiles
	defer func() { hostFiles = saved }()
	hostFiles = []struct{ name, path string }{
		{"hosts", filepath.Join(etc, "hosts")},
		{"resolv.conf", filepath.Join(etc, "resolv.conf")},
		{"ca-certificates.crt", filepath.Join(etc, "ssl", "certs", "ca-certificates.crt")},
		{"absent", filepath.Join(etc, "absent")},
	}
	_ = os.WriteFile(filepath.Join(etc, "absent"), []byte("template absent\n"), 0o644)
	for round := 0; round < 2; round++ {
		if err := LinkHostFiles(host); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, f := range hostFiles[:3] {
			got, err := os.ReadFile(f.path)
			if err != nil || string(got) != "host "+f.name+"\n" {
				t.Errorf("round %d: %s reads %q, %v; want the host's", round, f.path, got, err)
			}
			if target, err := os.Readlink(f.path); err != nil || target != filepath.Join(host, f.name) {
				t.Errorf("round %d: %s links to %q, %v", round, f.path, target, err)
			}
		}
		if got, _ := os.ReadFile(filepath.Join(etc, "absent")); string(got) != "template absent\n" {
			t.Errorf("a file the host dir lacks was changed: %q", got)
		}
	}
}
