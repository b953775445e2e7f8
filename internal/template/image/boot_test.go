package image

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"withruntime.dev/runtime/internal/template/rootfs"
)

func bootable(t *testing.T, s scene) (string, error) {
	t.Helper()
	r, err := rootfs.Open(s.root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return MakeBootable(r)
}

// TestBootableHostileAccounts: an image whose /etc/passwd, /etc/group and
// /etc/resolv.conf are symlinks out of the root gets its own files there;
// the host files the links name are neither read nor written.
func TestBootableHostileAccounts(t *testing.T) {
	s := newScene(t)
	victim := filepath.Join(s.outside, "victim")
	err := s.apply(t, Limits{}, layerTar(t,
		dir("etc"), symlink("etc/passwd", victim), symlink("etc/group", "../../outside/victim"),
		symlink("etc/resolv.conf", victim), dir("bin"), file("bin/sh", "#!"),
	))
	if err != nil {
		t.Fatal(err)
	}
	before := s.outsideState(t)
	shell, err := bootable(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if shell != "/bin/sh" {
		t.Errorf("shell %q, want /bin/sh (the image has no bash)", shell)
	}
	if after := s.outsideState(t); after != before {
		t.Errorf("files outside the root changed:\n%s\n%s", before, after)
	}
	passwd, _ := os.ReadFile(filepath.Join(s.root, "etc/passwd"))
	if !strings.Contains(string(passwd), "root:x:0:0:") || !strings.Contains(string(passwd), "user:x:1000:1000:user:/home/user:/bin/sh\n") {
		t.Errorf("passwd:\n%s", passwd)
	}
	group, _ := os.ReadFile(filepath.Join(s.root, "etc/group"))
	if !strings.Contains(string(group), "user:x:1000:") {
		t.Errorf("group:\n%s", group)
	}
	for _, p := range []string{"etc/passwd", "etc/group", "etc/resolv.conf"} {
		if fi, err := os.Lstat(filepath.Join(s.root, p)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s is not a regular file now: %v %v", p, fi, err)
		}
	}
	for p, owner := range map[string]uint32{"workspace": 1000, "home/user": 1000, "run/withruntime": 0, "opt/withruntime": 0, "tmp": 0} {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(s.root, p), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR || st.Uid != owner {
			t.Errorf("/%s: %+v %v; want a directory owned by %d", p, st.Uid, err, owner)
		}
	}
}

// TestBootableKeepsUser: an image with its own user and bash keeps them.
func TestBootableKeepsUser(t *testing.T) {
	s := newScene(t)
	passwd := "root:x:0:0:root:/root:/bin/bash\nuser:x:1001:1001::/srv/user:/bin/bash\n"
	if err := s.apply(t, Limits{}, layerTar(t, dir("etc"), file("etc/passwd", passwd), dir("bin"), file("bin/bash", "#!"),
		dir("workspace"))); err != nil {
		t.Fatal(err)
	}
	shell, err := bootable(t, s)
	if err != nil || shell != "/bin/bash" {
		t.Fatalf("shell %q, %v", shell, err)
	}
	if b, _ := os.ReadFile(filepath.Join(s.root, "etc/passwd")); string(b) != passwd {
		t.Errorf("passwd changed:\n%s", b)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(s.root, "workspace"), &st); err != nil || st.Uid != 1000 {
		t.Errorf("/workspace owner %d, %v; want 1000", st.Uid, err)
	}
}

func TestBootableRefusesSymlinkedMountPoint(t *testing.T) {
	s := newScene(t)
	if err := s.apply(t, Limits{}, layerTar(t, symlink("run", s.outside))); err != nil {
		t.Fatal(err)
	}
	before := s.outsideState(t)
	_, err := bootable(t, s)
	if err == nil || !strings.Contains(err.Error(), "/run/withruntime cannot be used as a mount point") {
		t.Fatalf("got %v", err)
	}
	if after := s.outsideState(t); after != before {
		t.Errorf("files outside the root changed:\n%s\n%s", before, after)
	}
}
