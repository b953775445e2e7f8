package itest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// TestCLICp: `sandbox cp` both ways, files and directories, placed as docker
// cp places them; modes and symlinks kept; symlinks never followed on the
// host.
func TestCLICp(t *testing.T) {
	e := newEnv(t)
	id := e.create(api.CreateSandboxRequest{}).ID
	host := t.TempDir()

	// A tree with an executable, a nested file, a symlink pointing out of the
	// tree (copied as a link, not as the host's /etc/passwd) and 3 MiB.
	tree := filepath.Join(host, "proj")
	mustDo(t, os.MkdirAll(filepath.Join(tree, "sub"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(tree, "run.sh"), []byte("#!/bin/sh\necho ran\n"), 0o755))
	big := strings.Repeat("0123456789abcdef", 3<<16)
	mustDo(t, os.WriteFile(filepath.Join(tree, "sub", "big.txt"), []byte(big), 0o600))
	mustDo(t, os.Symlink("/etc/passwd", filepath.Join(tree, "passwd")))

	// Into an existing directory: lands as /workspace/proj.
	if r := e.cli(nil, "sandbox", "cp", tree, id+":/workspace"); r.code != 0 {
		t.Fatalf("cp in: %+v", r)
	}
	res := e.sh(id, "cd /workspace/proj && ./run.sh && stat -c '%a %U' run.sh sub/big.txt && readlink passwd && sha256sum sub/big.txt | cut -c1-64")
	sum := sha256.Sum256([]byte(big))
	want := "ran\n755 user\n600 user\n/etc/passwd\n" + hex.EncodeToString(sum[:]) + "\n"
	if res.ExitCode != 0 || res.Stdout != want {
		t.Fatalf("in the sandbox: %+v, want stdout %q", res, want)
	}
	// Onto a new path: the directory becomes it; a single file too.
	if r := e.cli(nil, "sandbox", "cp", tree, id+":copy2"); r.code != 0 {
		t.Fatalf("cp in to a new name: %+v", r)
	}
	if r := e.cli(nil, "sandbox", "cp", filepath.Join(tree, "run.sh"), id+":/tmp/tool"); r.code != 0 {
		t.Fatalf("cp file in: %+v", r)
	}
	if res := e.sh(id, "test -f /workspace/copy2/run.sh && /tmp/tool"); res.ExitCode != 0 || res.Stdout != "ran\n" {
		t.Fatalf("after cp to new names: %+v", res)
	}

	// Out: a directory into an existing host directory, and a file.
	out := filepath.Join(host, "out")
	mustDo(t, os.Mkdir(out, 0o755))
	if r := e.cli(nil, "sandbox", "cp", id+":/workspace/proj", out); r.code != 0 {
		t.Fatalf("cp out: %+v", r)
	}
	got, err := os.ReadFile(filepath.Join(out, "proj", "sub", "big.txt"))
	if err != nil || string(got) != big {
		t.Fatalf("copied out: %d bytes, %v", len(got), err)
	}
	if fi, err := os.Stat(filepath.Join(out, "proj", "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("run.sh copied out: %v %v", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(out, "proj", "passwd")); err != nil || l != "/etc/passwd" {
		t.Fatalf("symlink copied out: %q %v", l, err)
	}
	if r := e.cli(nil, "sandbox", "cp", id+":/tmp/tool", filepath.Join(host, "tool")); r.code != 0 {
		t.Fatalf("cp file out: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "tool")); string(b) != "#!/bin/sh\necho ran\n" {
		t.Fatalf("file copied out: %q", b)
	}

	// Usage: both sides on the host.
	if r := e.cli(nil, "sandbox", "cp", tree, out); r.code == 0 || !strings.Contains(r.stderr, "ID:PATH") {
		t.Fatalf("cp host to host: %+v", r)
	}
}

// hostileTar is a tar that root inside a sandbox puts ahead of the real one
// in PATH: its archive makes a symlink to a host directory and writes a file
// through it, and names a file with "../".
const hostileTar = `#!/usr/bin/python3
import io, sys, tarfile
out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|")
def add(name, data=None, link=None):
    ti = tarfile.TarInfo(name)
    if link is not None:
        ti.type, ti.linkname = tarfile.SYMTYPE, link
        out.addfile(ti)
    else:
        ti.size = len(data)
        out.addfile(ti, io.BytesIO(data))
add("esc", link="VICTIM")
add("esc/pwned", b"through a link\n")
add("../pwned2", b"dot dot\n")
out.close()
`

// TestCLICpHostile: a directory copied out of a sandbox whose root made the
// archive hostile writes nothing outside the destination, and the copy fails.
func TestCLICpHostile(t *testing.T) {
	e := newEnv(t)
	id := e.create(api.CreateSandboxRequest{}).ID
	host := t.TempDir()
	victim := filepath.Join(host, "victim")
	mustDo(t, os.Mkdir(victim, 0o755))
	setup := agentapi.ExecRequest{User: "root", Command: `cat > /usr/local/bin/tar && chmod 755 /usr/local/bin/tar && mkdir -p /workspace/d`,
		Stdin: strings.Replace(hostileTar, "VICTIM", victim, 1)}
	if res := e.exec(id, setup); res.ExitCode != 0 {
		t.Fatalf("setting up the hostile tar: %+v", res)
	}
	dst := filepath.Join(host, "dst")
	if r := e.cli(nil, "sandbox", "cp", id+":/workspace/d", dst); r.code == 0 {
		t.Errorf("cp of a hostile archive succeeded: %+v", r)
	}
	for _, p := range []string{filepath.Join(victim, "pwned"), filepath.Join(host, "pwned2")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written outside the destination", p)
		}
	}
	if entries, _ := os.ReadDir(victim); len(entries) != 0 {
		t.Errorf("victim directory holds %d entries", len(entries))
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
