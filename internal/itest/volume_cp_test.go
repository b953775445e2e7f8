package itest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/api"
)

// TestCLIVolumeCp: `volume cp` both ways without a sandbox, files and
// directories, placed as `sandbox cp` places them; into a volume the files
// are 0644 and owned by the sandbox user, and what the volume file API
// cannot carry (modes, symlinks, empty directories) is said on stderr; out
// of a volume modes (less setuid) and symlinks are kept, and a symlink a
// sandbox left is copied as a link, never followed on the host.
func TestCLIVolumeCp(t *testing.T) {
	e := newEnv(t)
	e.createVolume("cpvol", 32)
	host := t.TempDir()

	tree := filepath.Join(host, "proj")
	mustDo(t, os.MkdirAll(filepath.Join(tree, "sub"), 0o755))
	mustDo(t, os.MkdirAll(filepath.Join(tree, "empty"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(tree, "run.sh"), []byte("#!/bin/sh\necho ran\n"), 0o755))
	big := strings.Repeat("0123456789abcdef", 3<<16)
	mustDo(t, os.WriteFile(filepath.Join(tree, "sub", "big.txt"), []byte(big), 0o600))
	mustDo(t, os.Symlink("/etc/passwd", filepath.Join(tree, "passwd")))

	// Into the volume's root, an existing directory: lands as /proj.
	r := e.cli(nil, "volume", "cp", tree, "cpvol:")
	if r.code != 0 {
		t.Fatalf("cp in: %+v", r)
	}
	for _, note := range []string{"2 file(s) are 0644", "1 symbolic link(s) were not copied", "1 empty director(ies) were not made"} {
		if !strings.Contains(r.stderr, note) {
			t.Errorf("cp in: stderr %q does not say %q", r.stderr, note)
		}
	}
	// Onto new paths: the directory becomes it; a single file too.
	if r := e.cli(nil, "volume", "cp", tree, "cpvol:copy2"); r.code != 0 {
		t.Fatalf("cp in to a new name: %+v", r)
	}
	if r := e.cli(nil, "volume", "cp", filepath.Join(tree, "run.sh"), "cpvol:/bin/tool"); r.code != 0 {
		t.Fatalf("cp file in: %+v", r)
	}
	sb := e.create(withVolumes(api.VolumeMount{Name: "cpvol", Path: "/data"}))
	res := e.sh(sb.ID, "cd /data && stat -c '%a %U' proj/run.sh proj/sub/big.txt && sha256sum proj/sub/big.txt | cut -c1-64 && "+
		"test ! -e proj/passwd && test ! -e proj/empty && cat copy2/run.sh bin/tool")
	sum := sha256.Sum256([]byte(big))
	want := "644 user\n644 user\n" + hex.EncodeToString(sum[:]) + "\n" + strings.Repeat("#!/bin/sh\necho ran\n", 2)
	if res.ExitCode != 0 || res.Stdout != want {
		t.Fatalf("in the volume: %+v, want stdout %q", res, want)
	}

	// Out: what a sandbox made (modes, a setuid bit, a link leading out).
	if res := e.sh(sb.ID, "cd /data/proj && chmod 755 run.sh && chmod 4750 sub/big.txt && ln -s /etc/shadow shadow"); res.ExitCode != 0 {
		t.Fatalf("making the tree: %+v", res)
	}
	out := filepath.Join(host, "out")
	mustDo(t, os.Mkdir(out, 0o755))
	if r := e.cli(nil, "volume", "cp", "cpvol:/proj", out); r.code != 0 {
		t.Fatalf("cp out: %+v", r)
	}
	if got, err := os.ReadFile(filepath.Join(out, "proj", "sub", "big.txt")); err != nil || string(got) != big {
		t.Fatalf("copied out: %d bytes, %v", len(got), err)
	}
	for name, mode := range map[string]os.FileMode{"run.sh": 0o755, "sub/big.txt": 0o750} {
		if fi, err := os.Stat(filepath.Join(out, "proj", name)); err != nil || fi.Mode() != mode {
			t.Errorf("%s copied out: %v %v, want mode %v", name, fi.Mode(), err, mode)
		}
	}
	if l, err := os.Readlink(filepath.Join(out, "proj", "shadow")); err != nil || l != "/etc/shadow" {
		t.Fatalf("symlink copied out: %q %v", l, err)
	}
	// A single file: onto a new host path, and into an existing directory.
	if r := e.cli(nil, "volume", "cp", "cpvol:proj/run.sh", filepath.Join(host, "tool")); r.code != 0 {
		t.Fatalf("cp file out: %+v", r)
	}
	if fi, err := os.Stat(filepath.Join(host, "tool")); err != nil || fi.Mode() != 0o755 {
		t.Fatalf("file copied out: %v %v, want mode 0755", fi, err)
	}
	if r := e.cli(nil, "volume", "cp", "cpvol:/bin/tool", out); r.code != 0 {
		t.Fatalf("cp file out into a directory: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "tool")); string(b) != "#!/bin/sh\necho ran\n" {
		t.Fatalf("file copied out into a directory: %q", b)
	}

	// Errors: both sides here, no such file, no such volume.
	if r := e.cli(nil, "volume", "cp", tree, out); r.code == 0 || !strings.Contains(r.stderr, "VOLUME:PATH") {
		t.Fatalf("cp host to host: %+v", r)
	}
	if r := e.cli(nil, "volume", "cp", "cpvol:/nope", filepath.Join(host, "nope")); r.code == 0 || !strings.Contains(r.stderr, "/nope") {
		t.Fatalf("cp of a missing file: %+v", r)
	}
	if r := e.cli(nil, "volume", "cp", filepath.Join(tree, "run.sh"), "novol:/x"); r.code == 0 || !strings.Contains(r.stderr, "novol") {
		t.Fatalf("cp into a missing volume: %+v", r)
	}
}
