package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/template/rootfs"
)

// layerTar builds an uncompressed layer from headers; a regular file's
// content is body (Size is set from it unless the header sets one).
type ent struct {
	hdr  tar.Header
	body string
}

func layerTar(t *testing.T, ents ...ent) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := e.hdr
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if e.body != "" {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

func dir(name string) ent { return ent{hdr: tar.Header{Name: name, Typeflag: tar.TypeDir}} }
func file(name, body string) ent {
	return ent{hdr: tar.Header{Name: name, Typeflag: tar.TypeReg}, body: body}
}
func symlink(name, target string) ent {
	return ent{hdr: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target}}
}
func hardlink(name, target string) ent {
	return ent{hdr: tar.Header{Name: name, Typeflag: tar.TypeLink, Linkname: target}}
}

// sandboxDir makes base/root (the root the layers go to) next to a
// sentinel directory base/outside with one file, and returns both and a
// func listing everything under base, to show nothing was written outside
// root.
type scene struct {
	base, root, outside string
}

func newScene(t *testing.T) scene {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the flattener sets owners: run as root")
	}
	base := t.TempDir()
	s := scene{base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{s.root, s.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.outside, "victim"), []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// outsideState lists base without root's subtree, with the victim's content.
func (s scene) outsideState(t *testing.T) string {
	t.Helper()
	var out []string
	err := filepath.Walk(s.base, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if p == s.root {
			return filepath.SkipDir
		}
		out = append(out, strings.TrimPrefix(p, s.base)+" "+fi.Mode().String())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(s.outside, "victim"))
	sort.Strings(out)
	return strings.Join(out, "\n") + "\nvictim=" + string(b)
}

func (s scene) apply(t *testing.T, lim Limits, layers ...*bytes.Buffer) error {
	t.Helper()
	r, err := rootfs.Open(s.root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f := NewFlattener(r, lim)
	for i, l := range layers {
		if err := f.Apply(l, "layer "+string(rune('1'+i))); err != nil {
			return err
		}
	}
	return nil
}

func TestFlattenBasics(t *testing.T) {
	s := newScene(t)
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	suid := file("usr/bin/su", "#!/bin/sh\n")
	suid.hdr.Mode = 0o4755
	owned := file("home/u/f", "mine")
	owned.hdr.Uid, owned.hdr.Gid, owned.hdr.ModTime = 1234, 5678, mtime
	sticky := dir("tmp")
	sticky.hdr.Mode = 0o1777
	fifo := ent{hdr: tar.Header{Name: "run/fifo", Typeflag: tar.TypeFifo, Mode: 0o600}}
	err := s.apply(t, Limits{}, layerTar(t,
		dir("./"), dir("usr/"), dir("usr/bin/"), suid, sticky,
		file("/etc/abs", "absolute names go under the root"),
		owned, // parents created on the way
		symlink("bin", "usr/bin"), symlink("etc/escape", "/../../outside/victim"),
		hardlink("usr/bin/su2", "/usr/bin/su"), fifo,
		file("usr/share/zeros", strings.Repeat("\x00", 1<<20)),
	))
	if err != nil {
		t.Fatal(err)
	}
	st := func(p string) *syscall.Stat_t {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(s.root, p), &st); err != nil {
			t.Fatal(err)
		}
		return &st
	}
	if m := st("usr/bin/su").Mode; m&0o7777 != 0o4755 {
		t.Errorf("setuid file mode %o, want 4755", m&0o7777)
	}
	if m := st("tmp").Mode; m&0o7777 != 0o1777 {
		t.Errorf("/tmp mode %o, want 1777", m&0o7777)
	}
	if b, _ := os.ReadFile(filepath.Join(s.root, "etc/abs")); string(b) != "absolute names go under the root" {
		t.Errorf("etc/abs = %q", b)
	}
	if o := st("home/u/f"); o.Uid != 1234 || o.Gid != 5678 || o.Mtim.Sec != mtime.Unix() {
		t.Errorf("home/u/f owner %d:%d mtime %d, want 1234:5678 %d", o.Uid, o.Gid, o.Mtim.Sec, mtime.Unix())
	}
	if o := st("home"); o.Uid != 0 || o.Mode&0o777 != 0o755 {
		t.Errorf("implicit parent /home: owner %d mode %o, want root 755", o.Uid, o.Mode&0o777)
	}
	if l, _ := os.Readlink(filepath.Join(s.root, "etc/escape")); l != "/../../outside/victim" {
		t.Errorf("symlink target %q: symlinks are kept as given", l)
	}
	if st("usr/bin/su2").Ino != st("usr/bin/su").Ino {
		t.Error("hard link is not the same inode")
	}
	if st("run/fifo").Mode&syscall.S_IFMT != syscall.S_IFIFO {
		t.Error("FIFO not created")
	}
	if z := st("usr/share/zeros"); z.Size != 1<<20 || z.Blocks*512 >= 1<<20 {
		t.Errorf("1 MiB of zeros: size %d, %d bytes allocated; want a hole", z.Size, z.Blocks*512)
	}
}

func TestFlattenWhiteouts(t *testing.T) {
	s := newScene(t)
	lower := layerTar(t, dir("a"), file("a/old", "1"), dir("a/sub"), file("a/sub/deep", "2"),
		file("gone", "3"), file("kept", "4"), dir("opq"), file("opq/x", "5"), file("d2f", "x"))
	upper := layerTar(t,
		file(".wh.gone", ""),
		dir("opq"), file("opq/new", "6"), file("opq/.wh..wh..opq", ""),
		file("same", "7"), file(".wh.same", ""), // same layer: not hidden
		file("a/.wh.sub", ""),
		dir("d2f"), // a file replaced by a directory
		file(".wh..wh.plnk", ""),
	)
	if err := s.apply(t, Limits{}, lower, upper); err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.Walk(s.root, func(p string, fi os.FileInfo, err error) error {
		if p != s.root {
			got = append(got, strings.TrimPrefix(p, s.root+"/"))
		}
		return nil
	})
	want := "a a/old d2f kept opq opq/new same"
	if strings.Join(got, " ") != want {
		t.Errorf("after whiteouts: %v\nwant %s", got, want)
	}
}

// TestFlattenHostile: each layer tries to write outside the root or carry
// what an image may not; each is refused with a clear error and leaves the
// files around the root as they were.
func TestFlattenHostile(t *testing.T) {
	dev := ent{hdr: tar.Header{Name: "dev/mem", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 1}}
	blk := ent{hdr: tar.Header{Name: "sda", Typeflag: tar.TypeBlock, Devmajor: 8}}
	cases := []struct {
		name   string
		layers [][]ent
		kind   error
		want   string
	}{
		{"dotdot", [][]ent{{file("../outside/victim", "pwned")}}, errs.Invalid, `contains ".."`},
		{"dotdot inside", [][]ent{{file("a/../../outside/victim", "pwned")}}, errs.Invalid, `contains ".."`},
		{"absolute symlink then write", [][]ent{{symlink("evil", "/../outside"), file("evil/victim", "pwned")}}, errs.Invalid, "through a symlink"},
		{"relative symlink then write", [][]ent{{symlink("evil", "../outside"), file("evil/victim", "pwned")}}, errs.Invalid, "through a symlink"},
		{"symlink in a lower layer", [][]ent{{symlink("evil", "/proc/self/root/"+"x")}, {dir("evil/d")}}, errs.Invalid, "through a symlink"},
		{"symlink then whiteout through it", [][]ent{{symlink("evil", "../outside")}, {file("evil/.wh.victim", "")}}, errs.Invalid, "through a symlink"},
		{"symlink then hard link through it", [][]ent{{symlink("evil", "../outside"), hardlink("x", "evil/victim")}}, errs.Invalid, "through a symlink"},
		{"whiteout of the root's parent", [][]ent{{file("keep", "1")}, {file(".wh...", "")}}, errs.Invalid, `whiteout of ".."`},
		{"whiteout of a directory's parent", [][]ent{{file("a/keep", "1")}, {file("a/.wh...", "")}}, errs.Invalid, `whiteout of ".."`},
		{"whiteout of the root itself", [][]ent{{file("keep", "1")}, {file(".wh..", "")}}, errs.Invalid, `whiteout of "."`},
		{"whiteout of no name", [][]ent{{file("keep", "1")}, {file(".wh.", "")}}, errs.Invalid, `whiteout of ""`},
		{"whiteout of the parent, as a directory", [][]ent{{file("keep", "1")}, {dir(".wh...")}}, errs.Invalid, `whiteout of ".."`},
		{"hard link outside", [][]ent{{hardlink("x", "../outside/victim")}}, errs.Invalid, "outside the image"},
		{"hard link to a missing file", [][]ent{{hardlink("x", "/outside/victim")}}, errs.Invalid, "not in the image"},
		{"char device", [][]ent{{dev}}, errs.Invalid, "character device (1:1)"},
		{"block device", [][]ent{{blk}}, errs.Invalid, "block device"},
		{"file as a parent", [][]ent{{file("f", "x"), file("f/g", "y")}}, errs.Invalid, "not a directory"},
		{"over the cap", [][]ent{{file("a", strings.Repeat("x", 600))}, {file("b", strings.Repeat("y", 600))}}, errs.TooLarge, "cap of 1000 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newScene(t)
			before := s.outsideState(t)
			var layers []*bytes.Buffer
			for _, l := range c.layers {
				layers = append(layers, layerTar(t, l...))
			}
			err := s.apply(t, Limits{MaxBytes: 1000}, layers...)
			if after := s.outsideState(t); after != before {
				t.Errorf("the files around the root changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			var le *LayerError
			if !errors.As(err, &le) || !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v; want a LayerError of %v saying %q", err, c.kind, c.want)
			}
			t.Log(err)
		})
	}
}

// TestFlattenSparseOverCap: a 10 GiB sparse file made by GNU tar is refused
// from its header, before anything is written.
func TestFlattenSparseOverCap(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("needs GNU tar")
	}
	s := newScene(t)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "README"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(src, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("end"), 10<<30)
	f.Close()
	out, err := exec.Command("tar", "-C", src, "--sparse", "-cf", "-", "README", "big").Output()
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > 1<<20 {
		t.Fatalf("the sparse tar is %d bytes; expected a small one", len(out))
	}
	err = s.apply(t, Limits{}, bytes.NewBuffer(out))
	if !errors.Is(err, errs.TooLarge) || !strings.Contains(err.Error(), "8 GiB") || !strings.Contains(err.Error(), `"big"`) {
		t.Fatalf("got %v; want too_large naming the file and the 8 GiB cap", err)
	}
	if _, err := os.Lstat(filepath.Join(s.root, "big")); !os.IsNotExist(err) {
		t.Errorf("the refused file was created: %v", err)
	}
}

// TestFlattenEntryCap: a layer of more entries than the cap is refused
// (millions of empty files would exhaust the host's inodes).
func TestFlattenEntryCap(t *testing.T) {
	s := newScene(t)
	err := s.apply(t, Limits{MaxEntries: 3}, layerTar(t, dir("a"), dir("b"), dir("c"), dir("d")))
	if !errors.Is(err, errs.TooLarge) || !strings.Contains(err.Error(), "more than 3 files") {
		t.Fatalf("got %v", err)
	}
}

func TestFlattenReplacesSymlinkNotThrough(t *testing.T) {
	s := newScene(t)
	victim := filepath.Join(s.outside, "victim")
	err := s.apply(t, Limits{},
		layerTar(t, symlink("x", victim), symlink("d", s.outside)),
		layerTar(t, file("x", "replaced"), dir("d")))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "original" {
		t.Errorf("the file was written through the symlink: victim = %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(s.root, "d")); err != nil || !fi.IsDir() {
		t.Errorf("a directory did not replace the symlink d: %v %v", fi, err)
	}
}

func TestFlattenBadTar(t *testing.T) {
	s := newScene(t)
	err := s.apply(t, Limits{}, bytes.NewBufferString(strings.Repeat("not a tar ", 100)))
	if !errors.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "not a valid tar stream") {
		t.Fatalf("got %v", err)
	}
}
