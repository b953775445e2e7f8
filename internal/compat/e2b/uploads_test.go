package e2b

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
)

// uploadOf is an upload holding data.
func uploadOf(t *testing.T, hash string, data []byte) *upload {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "upload")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	return &upload{hash: hash, file: f, size: int64(len(data))}
}

func tarOf(t *testing.T, gz bool, hdrs ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for _, h := range hdrs {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body = "content of " + h.Name
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	tw.Close()
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

// TestBuildContext: the Dockerfile, then each upload (gzipped or not)
// under files/HASH/; names outside the context and hard links are refused
// with the COPY step that brought them; devices are left out.
func TestBuildContext(t *testing.T) {
	hashB := strings.Repeat("b", 64)
	tr := translated{dockerfile: "FROM base\n", hashStep: map[string]int{hashA: 2, hashB: 5}}
	a := uploadOf(t, hashA, tarOf(t, true, tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755},
		tar.Header{Name: "app/", Typeflag: tar.TypeDir, Mode: 0o755}, tar.Header{Name: "app/x.py", Typeflag: tar.TypeReg, Mode: 0o644},
		tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, tar.Header{Name: "dev", Typeflag: tar.TypeChar}))
	b := uploadOf(t, hashB, tarOf(t, false, tar.Header{Name: "one.txt", Typeflag: tar.TypeReg, Mode: 0o600}))
	f, err := buildContext(t.TempDir(), tr, []*upload{a, b})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, _ := f.Seek(0, io.SeekEnd)
	r := tar.NewReader(io.NewSectionReader(f, 0, size))
	var got []string
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r)
		got = append(got, h.Name+" "+h.Linkname+" "+string(body))
	}
	sort.Strings(got)
	want := []string{
		"Dockerfile  FROM base\n",
		"files/" + hashA + "/app/  ",
		"files/" + hashA + "/app/x.py  content of app/x.py",
		"files/" + hashA + "/link /etc/passwd ",
		"files/" + hashB + "/one.txt  content of one.txt",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("context:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for _, c := range []struct {
		hdr  tar.Header
		want string
	}{
		{tar.Header{Name: "../escape", Typeflag: tar.TypeReg}, `"../escape", outside the template's file context`},
		{tar.Header{Name: "/abs", Typeflag: tar.TypeReg}, `"/abs", outside`},
		{tar.Header{Name: "hard", Typeflag: tar.TypeLink, Linkname: "x"}, `the hard link "hard"`},
	} {
		bad := uploadOf(t, hashB, tarOf(t, true, c.hdr))
		_, err := buildContext(t.TempDir(), tr, []*upload{bad})
		var se *stepError
		if !errors.As(err, &se) || se.step != 5 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want step 5 saying %q", c.hdr.Name, err, c.want)
		}
	}
	if _, err := buildContext(t.TempDir(), tr, []*upload{uploadOf(t, hashA, []byte{0x1f, 0x8b, 0, 1})}); err == nil || !strings.Contains(err.Error(), "step 2") {
		t.Errorf("a broken gzip: %v", err)
	}
}

// TestUploadMetadata: a write's X-Metadata-* headers become Runtime's
// metadata query (keys lower-cased, a repeated header's first value);
// what envd would refuse is refused here, before the sandbox sees it.
func TestUploadMetadata(t *testing.T) {
	h := http.Header{}
	h.Add("X-Metadata-Owner", "agent-7")
	h.Add("X-Metadata-Owner", "second")
	h.Add("X-Metadata-Stage", "")
	h.Add("Content-Type", "text/plain")
	q, err := uploadMetadata(h)
	if err != nil || q != `{"owner":"agent-7","stage":""}` {
		t.Errorf("%s %v", q, err)
	}
	if q, err := uploadMetadata(http.Header{"Content-Type": {"x"}}); q != "" || err != nil {
		t.Errorf("none: %q %v", q, err)
	}
	for _, bad := range []http.Header{{"X-Metadata-K": {"caf\u00e9"}}, {"X-Metadata-K": {"a\nb"}}, {"X-Metadata-Big": {strings.Repeat("v", 5000)}}} {
		if _, err := uploadMetadata(bad); err == nil {
			t.Errorf("%v was taken", bad)
		}
	}
}
