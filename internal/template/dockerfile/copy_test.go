package dockerfile

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/errs"
)

func testContext(t *testing.T) Context {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct {
		name, body, link string
		dir              bool
	}{
		{name: "./", dir: true}, {name: "Dockerfile", body: "FROM base"}, {name: "app/", dir: true},
		{name: "app/main.py", body: "print(1)"}, {name: "app/lib/x.py", body: "x"}, // no entry for app/lib/
		{name: "requirements.txt", body: "six"}, {name: "notes.txt", body: "n"}, {name: "link", link: "app/main.py"},
	} {
		h := &tar.Header{Name: e.name, Mode: 0o644, Uid: 501, Gid: 20}
		switch {
		case e.dir:
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.body)
	}
	tw.Close()
	return Context{R: bytes.NewReader(buf.Bytes()), Size: int64(buf.Len())}
}

func listTar(t *testing.T, b []byte) string {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	var out []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		s := fmt.Sprintf("%s %d:%d", h.Name, h.Uid, h.Gid)
		if len(body) > 0 {
			s += "=" + string(body)
		}
		if h.Linkname != "" {
			s += "->" + h.Linkname
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func TestCopyTar(t *testing.T) {
	c := testContext(t)
	for _, tc := range []struct {
		cmd  string
		srcs []string
		dst  string
		uid  int
		want string
	}{
		{"COPY", []string{"requirements.txt"}, "/app/", 0, "app/requirements.txt 0:0=six"},
		{"COPY", []string{"requirements.txt"}, "/app/req.txt", 1000, "app/req.txt 1000:1000=six"},
		{"COPY", []string{"app"}, "/srv", 0, "srv/ 0:0 srv/lib/x.py 0:0=x srv/main.py 0:0=print(1)"},
		{"COPY", []string{"*.txt"}, "/t", 0, "t/notes.txt 0:0=n t/requirements.txt 0:0=six"},
		{"COPY", []string{"link", "Dockerfile"}, "/d", 0, "d/Dockerfile 0:0=FROM base d/link 0:0->app/main.py"},
		{"ADD", []string{"/app/lib"}, "/l/", 0, "l/x.py 0:0=x"},
		{"COPY", []string{"."}, "/ctx", 0, "ctx/ 0:0 ctx/Dockerfile 0:0=FROM base ctx/app/ 0:0 ctx/app/lib/x.py 0:0=x ctx/app/main.py 0:0=print(1) ctx/link 0:0->app/main.py ctx/notes.txt 0:0=n ctx/requirements.txt 0:0=six"},
	} {
		var buf bytes.Buffer
		if _, err := c.copyTar(&buf, tc.cmd, tc.srcs, tc.dst, tc.uid, tc.uid, -1); err != nil {
			t.Errorf("%s %v %s: %v", tc.cmd, tc.srcs, tc.dst, err)
			continue
		}
		if got := listTar(t, buf.Bytes()); got != tc.want {
			t.Errorf("%s %v %s:\n got %s\nwant %s", tc.cmd, tc.srcs, tc.dst, got, tc.want)
		}
	}
	for _, tc := range []struct {
		cmd, src, want string
	}{
		{"COPY", "../etc/passwd", "outside the build context"},
		{"COPY", "missing.txt", "no such file or directory in the build context"},
		{"ADD", "https://example.test/x", "adding from a URL is not supported"},
		{"ADD", "x.tar.gz", "ADD does not unpack archives"},
	} {
		_, err := c.copyTar(io.Discard, tc.cmd, []string{tc.src}, "/x", 0, 0, -1)
		if !errors.Is(err, errs.Invalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v; want %q", tc.cmd, tc.src, err, tc.want)
		}
	}
}

// TestCopyTarChmod: --chmod sets every copied file's and directory's
// mode; a symlink keeps its own.
func TestCopyTarChmod(t *testing.T) {
	c := testContext(t)
	var buf bytes.Buffer
	if _, err := c.copyTar(&buf, "COPY", []string{"app", "link"}, "/srv/", 0, 0, 0o750); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	var got []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %o", h.Name, h.Mode))
	}
	sort.Strings(got)
	if want := "srv/ 750,srv/lib/x.py 750,srv/link 644,srv/main.py 750"; strings.Join(got, ",") != want {
		t.Errorf("modes: %s, want %s", strings.Join(got, ","), want)
	}
}

func TestWhiteouts(t *testing.T) {
	before := []byte("./\x00./a\x00./a/b\x00./a/b/c\x00./d\x00./e\x00../x\x00")
	after := []byte("./\x00./d\x00")
	got := listTar(t, whiteouts(before, after))
	if got != ".wh.a 0:0 .wh.e 0:0" {
		t.Errorf("whiteouts: %s", got)
	}
}
