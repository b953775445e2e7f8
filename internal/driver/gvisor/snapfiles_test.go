package gvisor

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"testing"
)

// layerTar is a tar archive of hdrs (a regular file's body is its Size
// bytes of 'x').
func layerTar(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && h.Size > 0 {
			_, _ = tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func readLayer(t *testing.T, data []byte) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = h
	}
}

// What root inside a sandbox can put in its root layer: only what is safe
// to hand to another sandbox is copied.
func TestCopyLayerKeepsFilesDropsDevices(t *testing.T) {
	src := layerTar(t,
		&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./work/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "./work/a.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 5, Uid: 1000, Gid: 1000,
			PAXRecords: map[string]string{"SCHILY.xattr.user.k": "v", "comment": "junk"}},
		&tar.Header{Name: "./work/suid", Typeflag: tar.TypeReg, Mode: 0o4755, Size: 3},
		&tar.Header{Name: "./work/host", Typeflag: tar.TypeSymlink, Linkname: "/var/lib/withruntime/snapshots", Mode: 0o777},
		&tar.Header{Name: "./work/sda", Typeflag: tar.TypeBlock, Devmajor: 8, Devminor: 0, Mode: 0o666},
		&tar.Header{Name: "./work/mem", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 1, Mode: 0o666},
		&tar.Header{Name: "./work/memlink", Typeflag: tar.TypeLink, Linkname: "./work/mem"},
		&tar.Header{Name: "./work/alink", Typeflag: tar.TypeLink, Linkname: "./work/a.txt"},
		&tar.Header{Name: "./etc/gone", Typeflag: tar.TypeChar, Devmajor: 0, Devminor: 0}, // a whiteout
		&tar.Header{Name: "./work/fifo", Typeflag: tar.TypeFifo, Mode: 0o644},
	)
	var dst bytes.Buffer
	st, err := copyLayer(&dst, bytes.NewReader(src), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if st.Kept != 8 || st.Dropped != 3 {
		t.Fatalf("kept %d dropped %d, want 8 and 3", st.Kept, st.Dropped)
	}
	got := readLayer(t, dst.Bytes())
	for _, gone := range []string{"./work/sda", "./work/mem", "./work/memlink"} {
		if got[gone] != nil {
			t.Errorf("%s was copied", gone)
		}
	}
	if h := got["./work/a.txt"]; h == nil || h.Size != 5 || h.Uid != 1000 || h.PAXRecords["SCHILY.xattr.user.k"] != "v" || h.PAXRecords["comment"] != "" {
		t.Errorf("a.txt: %+v", h)
	}
	if h := got["./work/suid"]; h == nil || h.Mode != 0o4755 {
		t.Errorf("suid: %+v", h)
	}
	if h := got["./work/host"]; h == nil || h.Linkname != "/var/lib/withruntime/snapshots" {
		t.Errorf("symlink: %+v", h)
	}
	if h := got["./etc/gone"]; h == nil || h.Typeflag != tar.TypeChar || h.Devmajor != 0 {
		t.Errorf("whiteout: %+v", h)
	}
	if h := got["./work/alink"]; h == nil || h.Linkname != "./work/a.txt" {
		t.Errorf("hard link: %+v", h)
	}
}

func TestCopyLayerRefusesBadNames(t *testing.T) {
	for _, name := range []string{"../etc/passwd", "/etc/passwd", "./a/../../b", "./a//b", "etc/passwd", "./.", "./a/./b"} {
		src := layerTar(t, &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644})
		if _, err := copyLayer(io.Discard, bytes.NewReader(src), 1<<20); !errors.Is(err, errLayer) {
			t.Errorf("%q: err %v, want errLayer", name, err)
		}
	}
	src := layerTar(t, &tar.Header{Name: "./x", Typeflag: tar.TypeGNUSparse, Mode: 0o644})
	if _, err := copyLayer(io.Discard, bytes.NewReader(src), 1<<20); !errors.Is(err, errLayer) {
		t.Errorf("sparse entry: err %v, want errLayer", err)
	}
}

func TestCopyLayerCap(t *testing.T) {
	src := layerTar(t, &tar.Header{Name: "./big", Typeflag: tar.TypeReg, Mode: 0o644, Size: 64 << 10})
	if _, err := copyLayer(io.Discard, bytes.NewReader(src), 16<<10); !errors.Is(err, errLayer) {
		t.Fatalf("err %v, want errLayer over the cap", err)
	}
	if _, err := copyLayer(io.Discard, bytes.NewReader(src), 1<<20); err != nil {
		t.Fatal(err)
	}
}

func TestOverlaySize(t *testing.T) {
	n, err := overlaySize([]string{"--network=none", "--overlay2=root:dir=/x,size=1048576"})
	if err != nil || n != 1<<20 {
		t.Fatalf("%d %v", n, err)
	}
	if _, err := overlaySize([]string{"--network=none"}); err == nil {
		t.Fatal("no flag: no error")
	}
}
