package registry

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sys/unix"

	"withruntime.dev/runtime/internal/template"
)

// serveRegistry serves an in-memory registry on loopback (wrapped by wrap,
// when not nil) and returns its host:port.
func serveRegistry(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// makeTemplate writes a small built template tname into a new store: files
// of several owners and modes, a symlink, a hard link, a FIFO and, where
// the filesystem keeps them, a file capability.
func makeTemplate(t *testing.T, tname string, origin *template.Origin) (*template.Store, bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (files of other owners)")
	}
	dir := t.TempDir()
	root := filepath.Join(dir, tname, "rootfs")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "home/user"), 0o700))
	must(os.Chown(filepath.Join(root, "home/user"), 1000, 1000))
	must(os.WriteFile(filepath.Join(root, "etc/hostname"), []byte("sandbox\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "etc/shadow"), []byte("root:*:1::::::\n"), 0o640))
	must(os.Chown(filepath.Join(root, "etc/shadow"), 0, 42))
	must(os.WriteFile(filepath.Join(root, "home/user/notes"), []byte("mine"), 0o600))
	must(os.Chown(filepath.Join(root, "home/user/notes"), 1000, 1000))
	must(os.WriteFile(filepath.Join(root, "suid"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Chmod(filepath.Join(root, "suid"), os.ModeSetuid|0o755))
	must(os.Symlink("/etc/hostname", filepath.Join(root, "link")))
	must(os.Link(filepath.Join(root, "etc/hostname"), filepath.Join(root, "hard")))
	must(unix.Mkfifo(filepath.Join(root, "fifo"), 0o644))
	// cap_net_raw+ep, as setcap writes it (VFS_CAP_REVISION_2).
	caps := []byte{0x01, 0x00, 0x00, 0x02, 0x00, 0x20, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	must(os.WriteFile(filepath.Join(root, "ping"), []byte("\x7fELF"), 0o755))
	hasCaps := unix.Setxattr(filepath.Join(root, "ping"), capabilityXattr, caps, 0) == nil
	when := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		return unix.Lutimes(p, []unix.Timeval{unix.NsecToTimeval(when.UnixNano()), unix.NsecToTimeval(when.UnixNano())})
	})
	info := template.Info{Name: tname, CreatedAt: when, SizeBytes: 4096, Packages: []string{"python3"}, Suite: "bookworm", Recipe: "abc", Origin: origin}
	raw, _ := json.Marshal(info)
	must(os.WriteFile(filepath.Join(dir, tname, "template.json"), raw, 0o644))
	return &template.Store{Dir: dir}, hasCaps
}

// TestPushWritesTheTemplateAsAnImage pushes a template to a registry on
// loopback, pulls it back, and finds its files as they are on disk and its
// metadata in the config; the same template pushed again is the same
// digest; a Catalog resolves it to that digest.
func TestPushWritesTheTemplateAsAnImage(t *testing.T) {
	store, hasCaps := makeTemplate(t, "mini", &template.Origin{Image: "example/mini", Env: []string{"LANG=C.UTF-8", "MARK=pushed"}, Shell: "/bin/sh"})
	host := serveRegistry(t, nil)
	ctx := context.Background()
	p, err := Push(ctx, store, "mini", host+"/wr/template-mini", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Tag != host+"/wr/template-mini:latest" || !strings.HasPrefix(p.Digest, "sha256:") || p.Ref != host+"/wr/template-mini@"+p.Digest {
		t.Fatalf("pushed %+v", p)
	}
	again, err := Push(ctx, store, "mini", host+"/wr/template-mini:v2", Options{})
	if err != nil || again.Digest != p.Digest {
		t.Fatalf("second push: %+v, %v; want the same digest %s", again, err, p.Digest)
	}

	ref, _ := name.NewDigest(p.Ref)
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || cf.Config.WorkingDir != "/workspace" || cf.Config.User != "user" ||
		strings.Join(cf.Config.Env, " ") != "LANG=C.UTF-8 MARK=pushed "+defaultPath || cf.Config.Labels[LabelTemplate] != "mini" ||
		!cf.Created.Equal(time.Unix(0, 0)) {
		t.Fatalf("config %+v", cf)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string]*tar.Header{}
	var order []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name], order = h, append(order, h.Name)
	}
	want := []string{"etc/", "etc/hostname", "etc/shadow", "hard", "home/", "home/user/", "home/user/notes", "link", "ping", "suid"}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Fatalf("entries %q, want %q (no FIFO)", order, want)
	}
	check := func(n string, typ byte, mode int64, uid, gid int, link string) {
		t.Helper()
		h := got[n]
		if h.Typeflag != typ || h.Mode != mode || h.Uid != uid || h.Gid != gid || h.Linkname != link || h.Uname != "" || h.Gname != "" ||
			!h.ModTime.Equal(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)) {
			t.Errorf("%s: type %c mode %o owner %d:%d (%q:%q) link %q mtime %v", n, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Uname, h.Gname, h.Linkname, h.ModTime)
		}
	}
	check("etc/shadow", tar.TypeReg, 0o640, 0, 42, "")
	check("home/user/", tar.TypeDir, 0o700, 1000, 1000, "")
	check("home/user/notes", tar.TypeReg, 0o600, 1000, 1000, "")
	check("suid", tar.TypeReg, 0o4755, 0, 0, "")
	check("link", tar.TypeSymlink, 0o777, 0, 0, "/etc/hostname")
	check("hard", tar.TypeLink, 0o644, 0, 0, "etc/hostname")
	if hasCaps && got["ping"].PAXRecords["SCHILY.xattr."+capabilityXattr] == "" {
		t.Errorf("ping lost its file capability: %v", got["ping"].PAXRecords)
	}

	cat := &Catalog{Prefix: host + "/wr/template-"}
	tpl, err := cat.Resolve(ctx, "mini")
	if err != nil {
		t.Fatal(err)
	}
	if tpl.Ref != p.Ref || strings.Join(tpl.Env, " ") != "LANG=C.UTF-8 MARK=pushed" || tpl.Info.Recipe != "abc" || tpl.Info.Origin.Shell != "/bin/sh" {
		t.Fatalf("resolved %+v, want %s", tpl, p.Ref)
	}
}

// TestPushRefusesBadInput: an unknown template, a bad or digest reference
// and a registry that refuses the push are errors naming the problem, and
// a refused push leaves the tag unset.
func TestPushRefusesBadInput(t *testing.T) {
	store, _ := makeTemplate(t, "mini", nil)
	ctx := context.Background()
	host := serveRegistry(t, nil)
	if _, err := Push(ctx, store, "nope", host+"/x", Options{}); !errors.Is(err, template.ErrNotFound) {
		t.Errorf("unknown template: %v", err)
	}
	for _, ref := range []string{"UPPER/Case", "host/x@sha256:0123", host + "/x@sha256:" + strings.Repeat("a", 64), ""} {
		if _, err := Push(ctx, store, "mini", ref, Options{}); err == nil || !strings.Contains(err.Error(), "reference") && !strings.Contains(err.Error(), "digest") {
			t.Errorf("reference %q: %v", ref, err)
		}
	}
	// A registry that takes the blobs but refuses the manifest.
	refusing := serveRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
				http.Error(w, `{"errors":[{"code":"DENIED","message":"quota exceeded"}]}`, http.StatusForbidden)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	_, err := Push(ctx, store, "mini", refusing+"/wr/template-mini", Options{})
	if err == nil || !strings.Contains(err.Error(), "quota exceeded") || !strings.Contains(err.Error(), "nothing was tagged") {
		t.Fatalf("refused push: %v", err)
	}
	if _, err := remote.Head(mustRef(t, refusing+"/wr/template-mini:latest")); err == nil {
		t.Fatal("the refused push left a tag")
	}
	// Unreachable.
	if _, err := Push(ctx, store, "mini", "127.0.0.1:1/x", Options{}); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("unreachable registry: %v", err)
	}
}

// TestPushAgent pushes a static binary as the agent's image and refuses a
// dynamic one.
func TestPushAgent(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "agent")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	host := serveRegistry(t, nil)
	ctx := context.Background()
	p, err := PushAgent(ctx, bin, host+"/wr/agent:test", Options{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := PushAgent(ctx, bin, host+"/wr/agent:again", Options{})
	if err != nil || again.Digest != p.Digest {
		t.Fatalf("again: %+v %v, want digest %s", again, err, p.Digest)
	}
	img, err := remote.Image(mustRef(t, p.Ref))
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	if err != nil || h.Name != "withruntime-agent" || h.Mode != 0o755 || h.Uid != 0 || h.Typeflag != tar.TypeReg {
		t.Fatalf("entry %+v, %v", h, err)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Fatalf("more than the agent in the layer: %v", err)
	}
	if _, err := PushAgent(ctx, "/bin/sh", host+"/wr/agent:dyn", Options{}); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Fatalf("dynamic binary: %v", err)
	}
	if _, err := PushAgent(ctx, src, host+"/wr/agent:src", Options{}); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Fatalf("not a binary: %v", err)
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
