package agent

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMetadataXattrs: a file's metadata round-trips through its user.e2b.*
// extended attributes; other attributes, and ones a write could not have
// set, are not reported.
func TestMetadataXattrs(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fsetxattr(int(f.Fd()), "user.probe", []byte("x"), 0); errors.Is(err, unix.ENOTSUP) {
		t.Skipf("%s has no user extended attributes here; the real sandboxes' are tested by compat/e2b", dir)
	}
	if err := setMetadata(f, map[string]string{"owner": "agent-7", "empty": ""}); err != nil {
		t.Fatal(err)
	}
	_ = unix.Fsetxattr(int(f.Fd()), "user.e2b.Bad Key", []byte("x"), 0)
	_ = unix.Fsetxattr(int(f.Fd()), "user.e2b.bin", []byte{0xff}, 0)
	m := readMetadata(p)
	if len(m) != 2 || m["owner"] != "agent-7" || m["empty"] != "" {
		t.Errorf("read back: %q", m)
	}
	if fi, err := fileInfo(p); err != nil || fi.Metadata["owner"] != "agent-7" {
		t.Errorf("fileInfo: %+v %v", fi, err)
	}
	if readMetadata(filepath.Join(dir, "missing")) != nil {
		t.Error("a missing file has metadata")
	}
}
