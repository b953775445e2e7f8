package itest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/server"
)

// Images are pushed to an in-process registry on loopback and imported
// through the API, into a templates directory of the test's own (so the
// shared one with base is never written).

func withTemplatesDir(dir string) option { return func(c *server.Config) { c.TemplatesDir = dir } }

// newRegistry serves an OCI registry on 127.0.0.1 for the test and returns
// its host:port.
func newRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func push(t *testing.T, ref string, img v1.Image) v1.Hash {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// imageOf makes a linux/amd64 image of layers with config cfg.
func imageOf(t *testing.T, cfg v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", "amd64", cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// tarEnt is one entry of a crafted layer; Body is a regular file's content.
type tarEnt struct {
	tar.Header
	Body string
}

func layerOf(t *testing.T, ents ...tarEnt) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := e.Header
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.Body))
		}
		if h.Mode == 0 {
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.Body)
	}
	tw.Close()
	return layerOfBytes(t, buf.Bytes())
}

func layerOfBytes(t *testing.T, b []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// baseLayer is the base template's root filesystem as one layer, as
// `docker build` would have it (no device nodes in /dev).
func baseLayer(t *testing.T) v1.Layer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "base-layer.tar")
	cmd := exec.Command("tar", "-C", filepath.Join(templatesDir, "base", "rootfs"), "--numeric-owner",
		"--exclude=./dev/*", "-cf", path, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, out)
	}
	l, err := tarball.LayerFromFile(path, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// dashLayer is a shell-only root: dash as /bin/sh with the C library it
// needs, from the base template. No bash, no coreutils, no /etc.
func dashLayer(t *testing.T) v1.Layer {
	t.Helper()
	base := filepath.Join(templatesDir, "base", "rootfs")
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(base, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	dir := func(n string) tarEnt { return tarEnt{Header: tar.Header{Name: n, Typeflag: tar.TypeDir, Mode: 0o755}} }
	return layerOf(t,
		dir("bin/"), tarEnt{Header: tar.Header{Name: "bin/sh", Mode: 0o755}, Body: read("usr/bin/dash")},
		dir("lib/"), dir("lib/x86_64-linux-gnu/"),
		tarEnt{Header: tar.Header{Name: "lib/x86_64-linux-gnu/libc.so.6", Mode: 0o755}, Body: read("usr/lib/x86_64-linux-gnu/libc.so.6")},
		dir("lib64/"),
		tarEnt{Header: tar.Header{Name: "lib64/ld-linux-x86-64.so.2", Mode: 0o755}, Body: read("usr/lib64/ld-linux-x86-64.so.2")},
	)
}

// importNDJSON posts a template create and reads the streamed events.
func (e *env) importNDJSON(req api.CreateTemplateRequest) ([]api.TemplateEvent, int, []byte) {
	e.t.Helper()
	status, data := e.do("POST", "/v1/templates", req, "Accept", agentapi.ContentTypeNDJSON)
	if status != http.StatusOK {
		return nil, status, data
	}
	var evs []api.TemplateEvent
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var ev api.TemplateEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			e.t.Fatalf("bad event %q: %v", sc.Text(), err)
		}
		if ev.Type != agentapi.EventHeartbeat {
			evs = append(evs, ev)
		}
	}
	return evs, status, data
}

// TestImageTemplate: the base template's files pushed as an image (plus a
// layer with a file and an ENV) become a template whose sandboxes boot, run
// python, see the file and the env, honour the file API and the disk cap,
// and the template cannot be deleted while they run.
func TestImageTemplate(t *testing.T) {
	tdir := filepath.Join(t.TempDir(), "templates")
	e := newEnv(t, withTemplatesDir(tdir))
	reg := newRegistry(t)
	extra := layerOf(t, tarEnt{Header: tar.Header{Name: "etc/withruntime-test", Mode: 0o644}, Body: "from the image\n"})
	img := imageOf(t, v1.Config{Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "FOO=from-image", "BAR=image"}, WorkingDir: "/srv"},
		baseLayer(t), extra)
	ref := reg + "/team/debian:1"
	digest := push(t, ref, img)

	evs, status, data := e.importNDJSON(api.CreateTemplateRequest{Name: "mydebian", FromImage: ref})
	if status != http.StatusOK || len(evs) == 0 {
		t.Fatalf("POST /v1/templates: %d %s", status, data)
	}
	last := evs[len(evs)-1]
	if last.Type != "template" || last.Template == nil || last.Template.Origin == nil {
		t.Fatalf("last event: %s", data)
	}
	var steps []string
	for _, ev := range evs[:len(evs)-1] {
		if ev.Type == "step" && ev.Done {
			steps = append(steps, fmt.Sprintf("%s (%.1fs)", ev.Step, ev.ElapsedSeconds))
		}
	}
	t.Logf("import steps: %s", strings.Join(steps, "; "))
	if !strings.Contains(strings.Join(steps, "\n"), "pulling and extracting layer 2/2") {
		t.Errorf("no layer progress in %v", steps)
	}
	o := last.Template.Origin
	if o.Image != ref || o.Digest != digest.String() || o.Shell != "/bin/bash" || o.WorkingDir != "/srv" {
		t.Errorf("origin %+v; want image %s digest %s shell /bin/bash", o, ref, digest)
	}
	var got api.Template
	e.must(http.StatusOK, "GET", "/v1/templates/mydebian", nil, &got)
	if got.Origin == nil || got.Origin.Digest != digest.String() || got.SizeBytes < 100<<20 {
		t.Errorf("GET template: %+v", got)
	}

	sb := e.create(api.CreateSandboxRequest{Template: "mydebian", DiskMiB: 64, Env: map[string]string{"BAR": "create"}})
	if res := e.sh(sb.ID, "python3 -c 'print(6*7)'"); res.ExitCode != 0 || res.Stdout != "42\n" {
		t.Fatalf("python3: %+v", res)
	}
	if res := e.sh(sb.ID, `echo "$(id -un) $(id -u) $PWD $FOO $BAR"; cat /etc/withruntime-test`); res.Stdout != "user 1000 /workspace from-image create\nfrom the image\n" {
		t.Errorf("user, cwd, env and the image's file: %+v", res)
	}
	e.must(http.StatusOK, "PUT", "/v1/sandboxes/"+sb.ID+"/files?path=notes/a.txt", "via the file API", nil)
	if res := e.sh(sb.ID, "stat -c '%U %s' /workspace/notes/a.txt && cat /workspace/notes/a.txt"); res.Stdout != "user 16\nvia the file API" {
		t.Errorf("file API: %+v", res)
	}
	if res := e.sh(sb.ID, "fallocate -l 1G /workspace/big"); res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left on device") {
		t.Errorf("the disk cap: %+v", res)
	}

	status, data = e.do("DELETE", "/v1/templates/mydebian", nil)
	if status != http.StatusConflict || !strings.Contains(string(data), sb.ID) {
		t.Errorf("DELETE while a sandbox uses it: %d %s", status, data)
	}
	e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil)
	e.must(http.StatusNoContent, "DELETE", "/v1/templates/mydebian", nil, nil)
	if status, data := e.do("GET", "/v1/templates/mydebian", nil); status != http.StatusNotFound {
		t.Errorf("GET after DELETE: %d %s", status, data)
	}
	if left := dirNames(t, tdir); len(left) != 1 || left[0] != ".mydebian.lock" {
		t.Errorf("left in the templates directory: %v", left)
	}
}

// TestImageTemplateWithoutBash: an image with only dash as /bin/sh, uploaded
// as a `docker save` tarball, gets the user and /workspace, and runs
// command lines with /bin/sh.
func TestImageTemplateWithoutBash(t *testing.T) {
	tdir := filepath.Join(t.TempDir(), "templates")
	e := newEnv(t, withTemplatesDir(tdir))
	img := imageOf(t, v1.Config{Env: []string{"GREETING=hi"}}, dashLayer(t))
	var tb bytes.Buffer
	if err := tarball.Write(mustTag(t, "example.test/dash:1"), img, &tb); err != nil {
		t.Fatal(err)
	}
	status, data := e.do("POST", "/v1/templates?name=dash&image=dash.tar", tb.Bytes(), "Content-Type", api.ContentTypeTar)
	if status != http.StatusCreated {
		t.Fatalf("upload: %d %s", status, data)
	}
	var tpl api.Template
	_ = json.Unmarshal(data, &tpl)
	if tpl.Origin == nil || tpl.Origin.Shell != "/bin/sh" || tpl.Origin.Image != "dash.tar" {
		t.Errorf("template: %s", data)
	}
	sb := e.create(api.CreateSandboxRequest{Template: "dash"})
	res := e.sh(sb.ID, `echo "$((6*7)) $0 $HOME $PWD $GREETING"; read line < /workspace/in.txt 2>/dev/null; echo "[$line]"`)
	if res.ExitCode != 0 || res.Stdout != "42 /bin/sh /home/user /workspace hi\n[]\n" {
		t.Errorf("command with /bin/sh: %+v", res)
	}
	e.must(http.StatusOK, "PUT", "/v1/sandboxes/"+sb.ID+"/files?path=in.txt", "written by the API\n", nil)
	if res := e.sh(sb.ID, `read line < in.txt; echo "[$line]"`); res.Stdout != "[written by the API]\n" {
		t.Errorf("file API: %+v", res)
	}
	if res := e.exec(sb.ID, agentapi.ExecRequest{Argv: []string{"/bin/sh", "-c", "echo argv"}}); res.Stdout != "argv\n" {
		t.Errorf("argv: %+v", res)
	}
}

func mustTag(t *testing.T, s string) name.Tag {
	t.Helper()
	tag, err := name.NewTag(s)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// TestCLITemplateFromImage: `template build --from-image` with a registry
// image, an OCI layout directory and a `docker save` tarball (the last two
// uploaded by the CLI), then ls, run and rm.
func TestCLITemplateFromImage(t *testing.T) {
	tdir := filepath.Join(t.TempDir(), "templates")
	e := newEnv(t, withTemplatesDir(tdir))
	reg := newRegistry(t)
	img := imageOf(t, v1.Config{Env: []string{"GREETING=hello"}}, dashLayer(t))
	push(t, reg+"/cli/dash:1", img)
	dir := t.TempDir()
	lp, err := layout.Write(filepath.Join(dir, "oci"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(dir, "dash.tar")
	if err := tarball.WriteToFile(tarPath, mustTag(t, "example.test/dash:1"), img); err != nil {
		t.Fatal(err)
	}
	for name, ref := range map[string]string{"fromreg": reg + "/cli/dash:1", "fromlayout": "oci-layout:" + filepath.Join(dir, "oci"), "fromtar": tarPath} {
		r := e.cli(nil, "template", "build", name, "--from-image", ref)
		if r.code != 0 || !strings.Contains(r.stderr, "template "+name+" made from "+ref) || !strings.Contains(r.stderr, "pulling and extracting layer 1/1") && !strings.Contains(r.stderr, "extracting layer 1/1") {
			t.Errorf("build %s from %s: %+v", name, ref, r)
		}
	}
	r := e.cli(nil, "template", "ls")
	t.Logf("ls:\n%s", r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, "FROM") || !strings.Contains(r.stdout, reg+"/cli/dash:1 (sha256:") || !strings.Contains(r.stdout, "oci-layout:") {
		t.Errorf("template ls: %+v", r)
	}
	if r := e.cli(nil, "sandbox", "run", "--template", "fromlayout", "--", `echo "$((6*7)) $GREETING"`); r.code != 0 || r.stdout != "42 hello\n" {
		t.Errorf("sandbox run on the layout's template: %+v", r)
	}
	if r := e.cli(nil, "template", "build", "fromtar", "--from-image", tarPath); r.code != 125 || !strings.Contains(r.stderr, `template "fromtar" already exists`) {
		t.Errorf("build over an existing template: %+v", r)
	}
	if r := e.cli(nil, "template", "build", "nope", "--from-image", reg+"/cli/none:1"); r.code != 125 || !strings.Contains(r.stderr, "was not found") {
		t.Errorf("build from a missing image: %+v", r)
	}
	if r := e.cli(nil, "template", "rm", "fromreg"); r.code != 0 {
		t.Errorf("template rm: %+v", r)
	}
	if left := dirNames(t, tdir); strings.Contains(strings.Join(left, " "), "fromreg ") {
		t.Errorf("after rm: %v", left)
	}
}
