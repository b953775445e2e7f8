package itest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/internal/template"
)

// warmDockerfile is a template whose start command is a web server over
// /workspace; `curl` is in base (its ready check).
const warmDockerfile = `FROM base
RUN echo warm-page > /workspace/index.html && chown 1000:1000 /workspace/index.html
CMD python3 -m http.server 8000
`

// buildWarm builds the warm template name from warmDockerfile with ready
// check ready (and readyTimeoutSeconds timeout, "" for the default) and
// returns the build's events.
func (e *env) buildWarm(name, ready, timeout string) ([]api.TemplateEvent, int, []byte) {
	e.t.Helper()
	q := url.Values{"readyCommand": {ready}}
	if timeout != "" {
		q.Set("readyTimeoutSeconds", timeout)
	}
	return e.buildDockerfile(name, q, contextTar(e.t, map[string]string{"Dockerfile": warmDockerfile}))
}

// warmImages are the server's warm images (snapshot records named
// warm:...).
func (e *env) warmImages() []store.Snapshot {
	e.t.Helper()
	all, err := e.srv.Store.ListSnapshots(context.Background(), store.SnapshotFilter{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []store.Snapshot
	for _, sn := range all {
		if strings.HasPrefix(sn.Name, "warm:") {
			out = append(out, sn)
		}
	}
	return out
}

// dirDigest is a digest of every file under dir: names, modes and contents.
func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	var names []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	for _, p := range names {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(h, p+" "+fi.Mode().String()+"\n")
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(h, f)
			f.Close()
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// startedProcess is the sandbox's background process running command, or
// nil.
func (e *env) startedProcess(id, command string) *agentapi.Process {
	e.t.Helper()
	var list agentapi.ProcessList
	e.must(http.StatusOK, "GET", "/v1/sandboxes/"+id+"/processes", nil, &list)
	for _, p := range list.Processes {
		if p.Command == command {
			return &p
		}
	}
	return nil
}

// TestWarmTemplate: a template whose start command is `python3 -m
// http.server 8000` and whose ready check is `curl -sf localhost:8000`.
// The build runs the start and saves the warm image; the first exec after
// a create finds the server answering (the server was started before the
// create: restored, not started by it); two creates are independent; a
// create of another shape boots the template and starts it in place, also
// answering at its first exec. A ready check that never passes fails the
// build with its output, and no template is left.
func TestWarmTemplate(t *testing.T) {
	s := newHostileScene(t)
	withBase(t, s.tdir)
	e := newEnv(t, withTemplatesDir(s.tdir))

	evs, status, data := e.buildWarm("web", "curl -sf localhost:8000", "")
	if status != http.StatusOK || len(evs) == 0 || evs[len(evs)-1].Type != "template" {
		t.Fatalf("build: %d %s", status, data)
	}
	sawStart := false
	for _, ev := range evs {
		sawStart = sawStart || (ev.Type == "step" && ev.Done && strings.HasPrefix(ev.Step, "starting the template"))
	}
	tpl := evs[len(evs)-1].Template
	if !sawStart || tpl.Start == nil || tpl.Start.Command != "python3 -m http.server 8000" || tpl.Start.ReadyCommand != "curl -sf localhost:8000" {
		t.Fatalf("the build did not start the template (step seen %v): %+v", sawStart, tpl)
	}
	warm := e.warmImages()
	if len(warm) != 1 || warm[0].Template != "web" || warm[0].State != store.SnapshotReady {
		t.Fatalf("warm images after the build: %+v", warm)
	}

	a := e.create(api.CreateSandboxRequest{Template: "web"})
	// The first command: no wait, no retry.
	if r := e.sh(a.ID, "curl -sf localhost:8000/index.html"); r.ExitCode != 0 || r.Stdout != "warm-page\n" {
		t.Fatalf("the first exec after create: %+v", r)
	}
	p := e.startedProcess(a.ID, "python3 -m http.server 8000")
	if p == nil || !p.Running || !p.StartedAt.Before(a.CreatedAt) {
		t.Errorf("the server in a sandbox of the warm template should be the warm image's, started before the create (%s): %+v", a.CreatedAt, p)
	}
	b := e.create(api.CreateSandboxRequest{Template: "web"})
	if r := e.sh(b.ID, `python3 -c 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:8000/index.html").read().decode(), end="")'`); r.ExitCode != 0 || r.Stdout != "warm-page\n" {
		t.Fatalf("the first exec in a second sandbox: %+v", r)
	}
	if a.ID == b.ID {
		t.Fatalf("two creates gave one sandbox %s", a.ID)
	}
	e.sh(a.ID, "echo only-a > /workspace/only-a.txt")
	if r := e.sh(b.ID, "test -e /workspace/only-a.txt && echo SEEN; curl -s -o /dev/null -w '%{http_code}' localhost:8000/only-a.txt"); r.Stdout != "404" {
		t.Errorf("a file written in one sandbox shows in the other: %+v", r)
	}
	if r := e.sh(a.ID, "curl -sf localhost:8000/only-a.txt"); r.Stdout != "only-a\n" {
		t.Errorf("the writer's own server: %+v", r)
	}
	if n := len(e.warmImages()); n != 1 {
		t.Errorf("creates made %d warm images, want the one of the build", n)
	}

	// Another shape: booted, started in place, ready at the first exec.
	c := e.create(api.CreateSandboxRequest{Template: "web", MemoryMiB: 1024})
	if r := e.sh(c.ID, "curl -sf localhost:8000/index.html"); r.ExitCode != 0 || r.Stdout != "warm-page\n" {
		t.Fatalf("the first exec in a sandbox of another shape: %+v", r)
	}
	if p := e.startedProcess(c.ID, "python3 -m http.server 8000"); p == nil || p.StartedAt.Before(c.CreatedAt) {
		t.Errorf("a sandbox of another shape should have started its own server: %+v", p)
	}

	// A ready check that never passes fails the build, with its output.
	evs, status, data = e.buildWarm("broken", "echo not-yet-$((6*7)) >&2; exit 3", "2")
	if status != http.StatusOK || len(evs) == 0 || evs[len(evs)-1].Type != "error" {
		t.Fatalf("a build whose ready check fails: %d %s", status, data)
	}
	if msg := evs[len(evs)-1].Error.Message; evs[len(evs)-1].Error.Code != "bad_request" || !strings.Contains(msg, "not-yet-42") || !strings.Contains(msg, "did not pass within 2s") {
		t.Errorf("the failed build's error: %+v", evs[len(evs)-1].Error)
	}
	if st, _ := e.do("GET", "/v1/templates/broken", nil); st != http.StatusNotFound {
		t.Errorf("the template whose start failed is still there: %d", st)
	}
	if n := len(e.warmImages()); n != 1 {
		t.Errorf("warm images after the failed build: %d, want 1", n)
	}

	// A warm image another runsc wrote cannot be restored: the next create
	// makes it again and starts from the new one; nothing half-starts.
	old := e.warmImages()[0]
	note := filepath.Join(e.dataDir, "gvisor", "snapshots", old.ID, "snapshot.json")
	raw, err := os.ReadFile(note)
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	meta["runsc"] = "runsc version 0.0.0-another"
	raw, _ = json.Marshal(meta)
	if err := os.WriteFile(note, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	d := e.create(api.CreateSandboxRequest{Template: "web"})
	if r := e.sh(d.ID, "curl -sf localhost:8000/index.html"); r.ExitCode != 0 || r.Stdout != "warm-page\n" {
		t.Fatalf("the first exec after the warm image was made again: %+v", r)
	}
	w := e.warmImages()
	if len(w) != 1 || w[0].ID == old.ID {
		t.Fatalf("warm images after the remake: %+v (the old one was %s)", w, old.ID)
	}
	// Its server was started in the warm-up (during this create), before
	// the new image was saved.
	if p := e.startedProcess(d.ID, "python3 -m http.server 8000"); p == nil || !p.StartedAt.Before(w[0].CreatedAt) {
		t.Errorf("the sandbox after the remake should be restored from the new warm image (saved %s): %+v", w[0].CreatedAt, p)
	}
	if _, err := os.Stat(filepath.Dir(note)); !os.IsNotExist(err) {
		t.Errorf("the old warm image is still on disk: %v", err)
	}

	// Deleting the template deletes its warm image.
	for _, id := range []string{a.ID, b.ID, c.ID, d.ID} {
		e.must(http.StatusNoContent, "DELETE", "/v1/sandboxes/"+id, nil, nil)
	}
	last := e.warmImages()
	e.must(http.StatusNoContent, "DELETE", "/v1/templates/web", nil, nil)
	if w := e.warmImages(); len(w) != 0 {
		t.Errorf("warm images after the template's delete: %+v", w)
	}
	if len(last) == 1 {
		if _, err := os.Stat(filepath.Join(e.dataDir, "gvisor", "snapshots", last[0].ID)); !os.IsNotExist(err) {
			t.Errorf("the deleted template's warm image is still on disk: %v", err)
		}
	}
}

// TestWarmTemplateHostile: root inside a sandbox made from a warm template
// finds no trace of the warm image, cannot change it (its files on the host
// are the same before and after, and a later sandbox has none of root's
// changes), cannot reach another sandbox made from it (each has its own
// address; the other's server answers on its own), and no API route names
// the image: not listed, not found by id or name, not restorable, not
// deletable, by an administrator's key or a tenant's.
func TestWarmTemplateHostile(t *testing.T) {
	in := newFakeInternet(t)
	s := newHostileScene(t)
	withBase(t, s.tdir)
	e := newEnv(t, withTemplatesDir(s.tdir), withInternet(in))
	if evs, status, data := e.buildWarm("web", "curl -sf localhost:8000", ""); status != http.StatusOK || len(evs) == 0 || evs[len(evs)-1].Type != "template" {
		t.Fatalf("build: %d %s", status, data)
	}
	warm := e.warmImages()
	if len(warm) != 1 {
		t.Fatalf("warm images: %+v", warm)
	}
	image := filepath.Join(e.dataDir, "gvisor", "snapshots", warm[0].ID)
	before := dirDigest(t, image)

	allow := &api.NetworkPolicy{Allow: []string{inetAPI}}
	a := e.create(api.CreateSandboxRequest{Template: "web", Network: allow})
	b := e.create(api.CreateSandboxRequest{Template: "web", Network: allow})
	aAddr, bAddr := e.sandboxAddr(a.ID), e.sandboxAddr(b.ID)
	if aAddr == bAddr {
		t.Fatalf("two sandboxes of the warm template share the address %s", aAddr)
	}
	if r := e.sh(b.ID, curl("http://"+bAddr+":8000/")); r.Stdout != "200" {
		t.Fatalf("b's server on its own address (%s): %+v", bAddr, r)
	}
	if r := e.rootSh(a.ID, curl("http://"+bAddr+":8000/")); r.Stdout == "200" {
		t.Errorf("root in %s reached %s's server at %s:8000: %+v", a.ID, b.ID, bAddr, r)
	}

	// Root looks for the image, and changes what it can: the page, the
	// server's code, the host directory.
	r := e.rootSh(a.ID, `find / -xdev \( -name pages.img -o -name pages_meta.img -o -name checkpoint.img -o -name snapshot.json -o -name 'warm-*' \) 2>/dev/null | head -3; `+
		`ls /run/withruntime/host 2>/dev/null | grep -v -x -e withruntime-agent -e etc; `+
		`touch /run/withruntime/host/x 2>/dev/null && echo WROTE-HOST; `+
		`echo tampered > /workspace/index.html; `+
		`f=$(python3 -c 'import http.server; print(http.server.__file__)'); echo 'raise SystemExit("tampered")' > "$f" && echo CHANGED-MODULE; sync`)
	if strings.Contains(r.Stdout, ".img") || strings.Contains(r.Stdout, "snapshot.json") || strings.Contains(r.Stdout, "warm-") || strings.Contains(r.Stdout, "WROTE-HOST") || !strings.Contains(r.Stdout, "CHANGED-MODULE") {
		t.Errorf("root in a sandbox of the warm template: %+v", r)
	}
	if after := dirDigest(t, image); after != before {
		t.Errorf("the warm image changed while a sandbox made from it ran as root")
	}
	c := e.create(api.CreateSandboxRequest{Template: "web", Network: allow})
	if r := e.sh(c.ID, `curl -sf localhost:8000/index.html; python3 -c 'import http.server; print("module ok")'`); r.Stdout != "warm-page\nmodule ok\n" {
		t.Errorf("a later sandbox of the warm template sees root's changes in another: %+v", r)
	}

	// No route names the image.
	tenant := e.quotaKey(api.CreateKeyRequest{Name: "warm-tenant", DailyLimitMicros: 50_000_000})
	for _, k := range []*env{e, e.as(tenant.Secret)} {
		var list api.SnapshotList
		k.must(http.StatusOK, "GET", "/v1/snapshots", nil, &list)
		for _, sn := range list.Snapshots {
			if sn.ID == warm[0].ID {
				t.Errorf("GET /v1/snapshots lists the warm image: %+v", sn)
			}
		}
		for _, ref := range []string{warm[0].ID, warm[0].Name} {
			if st, data := k.do("GET", "/v1/snapshots/"+ref, nil); st != http.StatusNotFound {
				t.Errorf("GET /v1/snapshots/%s: %d %s", ref, st, data)
			}
			if st, data := k.do("DELETE", "/v1/snapshots/"+ref, nil); st != http.StatusNotFound {
				t.Errorf("DELETE /v1/snapshots/%s: %d %s", ref, st, data)
			}
			if st, data := k.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{Snapshot: ref}); st != http.StatusNotFound {
				t.Errorf("a create from the warm image %s: %d %s", ref, st, data)
			}
		}
	}
	if w := e.warmImages(); len(w) != 1 || w[0].ID != warm[0].ID || dirDigest(t, image) != before {
		t.Errorf("the warm image after the attempts: %+v", w)
	}

	// A tenant's template is private, and so is its warm image: held by
	// the tenant (its bytes in the tenant's disk use), named by no route
	// of the tenant's either.
	te := e.as(tenant.Secret)
	if evs, status, data := te.buildWarm("tweb", "curl -sf localhost:8000", ""); status != http.StatusOK || len(evs) == 0 || evs[len(evs)-1].Type != "template" || !evs[len(evs)-1].Template.Private {
		t.Fatalf("the tenant's build: %d %s", status, data)
	}
	var mine store.Snapshot
	for _, sn := range e.warmImages() {
		if sn.Template == "tweb" {
			mine = sn
		}
	}
	if mine.KeyID != tenant.ID || mine.Bytes == 0 || warm[0].KeyID != "" {
		t.Fatalf("warm images' holders: the tenant's template's %q (%d bytes; want %s), the shared one's %q (want none)", mine.KeyID, mine.Bytes, tenant.ID, warm[0].KeyID)
	}
	if use, err := e.srv.Store.KeyUse(context.Background(), tenant.ID); err != nil || use.SnapshotBytes != mine.Bytes {
		t.Errorf("the tenant's disk use: %+v %v, want its warm image's %d bytes", use, err, mine.Bytes)
	}
	var list api.SnapshotList
	te.must(http.StatusOK, "GET", "/v1/snapshots", nil, &list)
	if len(list.Snapshots) != 0 {
		t.Errorf("the tenant lists %+v", list.Snapshots)
	}
	if st, data := te.do("GET", "/v1/snapshots/"+mine.ID, nil); st != http.StatusNotFound {
		t.Errorf("the tenant gets its template's warm image: %d %s", st, data)
	}
	tsb := te.create(api.CreateSandboxRequest{Template: "tweb"})
	if r := te.sh(tsb.ID, "curl -sf localhost:8000/index.html"); r.Stdout != "warm-page\n" {
		t.Errorf("the first exec in the tenant's warm template: %+v", r)
	}
}

// TestWarmCodeInterpreter: code-interpreter is warm (its start: the default
// context's kernel). A create restores the warm image: the first run_code
// finds the kernel up with numpy, pandas and matplotlib imported (the
// context older than the sandbox), sees the create's env, and each copy's
// random generators are seeded anew (two sandboxes draw different numbers,
// where one saved state would draw the same).
func TestWarmCodeInterpreter(t *testing.T) {
	needCodeInterpreter(t)
	e := newEnv(t)
	var tpl api.Template
	e.must(http.StatusOK, "GET", "/v1/templates/"+template.CodeInterpreter, nil, &tpl)
	if tpl.Start == nil || !tpl.Start.Kernel {
		t.Fatalf("code-interpreter's start: %+v", tpl.Start)
	}
	draw := agentapi.RunCodeRequest{Code: "import random, numpy, sys, os\n" +
		"(('pandas' in sys.modules, 'matplotlib.pyplot' in sys.modules, os.environ.get('FROM_CREATE')), random.random(), float(numpy.random.rand()))"}
	var firsts []string
	for i := range 3 {
		start := time.Now()
		sb := e.create(api.CreateSandboxRequest{Template: template.CodeInterpreter, Env: map[string]string{"FROM_CREATE": "yes"}})
		ex := e.code(sb.ID, draw)
		took := time.Since(start)
		got := mainText(t, ex)
		t.Logf("create %d: create to first run_code result %v (the call %d ms): %s", i, took, ex.DurationMs, got)
		if !strings.HasPrefix(got, "((True, True, 'yes'), ") || ex.ExecutionCount != 1 {
			t.Fatalf("the first call in sandbox %d: %q %+v", i, got, ex)
		}
		firsts = append(firsts, got)
		if i == 0 {
			if w := e.warmImages(); len(w) != 1 || w[0].Template != template.CodeInterpreter {
				t.Fatalf("the first create made no warm image: %+v", w)
			}
			continue
		}
		var c agentapi.Context
		e.must(http.StatusOK, "GET", "/v1/sandboxes/"+sb.ID+"/contexts/"+agentapi.DefaultContextID, nil, &c)
		if !c.CreatedAt.Before(sb.CreatedAt) {
			t.Errorf("sandbox %d's default context (%s) is not the warm image's (the sandbox was created %s)", i, c.CreatedAt, sb.CreatedAt)
		}
	}
	if firsts[1] == firsts[2] {
		t.Errorf("two sandboxes from one warm image drew the same random numbers: %s", firsts[1])
	}
}

// TestWarmTemplateCLI: README's warm template example, through the CLI:
// the Dockerfile's CMD is the start, --ready-cmd its check; the first
// command of `sandbox run` finds the server answering; `template ls` shows
// the start; a recipe's template takes no start flags.
func TestWarmTemplateCLI(t *testing.T) {
	s := newHostileScene(t)
	withBase(t, s.tdir)
	e := newEnv(t, withTemplatesDir(s.tdir))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM base\nRUN echo hello > /workspace/index.html\nCMD python3 -m http.server 8000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.cli(nil, "template", "build", "web", "-f", filepath.Join(dir, "Dockerfile"), "--ready-cmd", "curl -sf localhost:8000", dir)
	if r.code != 0 || !strings.Contains(r.stderr, "template web is warm") {
		t.Fatalf("build: %+v", r)
	}
	if r := e.cli(nil, "sandbox", "run", "--template", "web", "--", "curl -s localhost:8000"); r.code != 0 || r.stdout != "hello\n" {
		t.Errorf("the first command in a sandbox of the warm template: %+v", r)
	}
	if r := e.cli(nil, "template", "ls"); !strings.Contains(r.stdout, `"python3 -m http.server 8000", ready: "curl -sf localhost:8000"`) {
		t.Errorf("template ls: %+v", r)
	}
	if r := e.cli(nil, "template", "build", "base", "--templates-dir", s.tdir, "--start-cmd", "sleep 1"); r.code == 0 || !strings.Contains(r.stderr, "go with -f Dockerfile or --from-image") {
		t.Errorf("a recipe's build with --start-cmd: %+v", r)
	}
}

// TestWarmImageOnce: concurrent first creates of a warm template share one
// warm-up (one image, every create answers with the kernel up), and the
// image outlives a server restart: the next server's creates restore it.
func TestWarmImageOnce(t *testing.T) {
	needCodeInterpreter(t)
	dataDir, err := os.MkdirTemp("/tmp", "wr-warmonce-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	e := newEnv(t, withDataDir(dataDir))
	const n = 3
	type made struct {
		sb  api.Sandbox
		ex  agentapi.Execution
		err string
	}
	res := make(chan made, n)
	for range n {
		go func() {
			st, data := e.do("POST", "/v1/sandboxes", api.CreateSandboxRequest{Template: template.CodeInterpreter})
			var m made
			if st != http.StatusCreated {
				m.err = string(data)
				res <- m
				return
			}
			if err := json.Unmarshal(data, &m.sb); err != nil {
				m.err = err.Error()
			}
			res <- m
		}()
	}
	for range n {
		m := <-res
		if m.err != "" {
			t.Fatalf("a concurrent create: %s", m.err)
		}
		if got := mainText(t, e.code(m.sb.ID, agentapi.RunCodeRequest{Code: "import sys; 'pandas' in sys.modules"})); got != "True" {
			t.Errorf("sandbox %s: %q", m.sb.ID, got)
		}
	}
	w := e.warmImages()
	if len(w) != 1 {
		t.Fatalf("%d concurrent creates made %d warm images: %+v", n, len(w), w)
	}
	e.srv.Manager.DestroyAll(context.Background())
	e.detach()

	e2 := newEnv(t, withDataDir(dataDir))
	if w2 := e2.warmImages(); len(w2) != 1 || w2[0].ID != w[0].ID {
		t.Fatalf("warm images after a restart: %+v, want %s kept", w2, w[0].ID)
	}
	sb := e2.create(api.CreateSandboxRequest{Template: template.CodeInterpreter})
	var c agentapi.Context
	e2.must(http.StatusOK, "GET", "/v1/sandboxes/"+sb.ID+"/contexts/"+agentapi.DefaultContextID, nil, &c)
	if !c.CreatedAt.Before(w[0].CreatedAt) {
		t.Errorf("after a restart the default context (%s) is not the warm image's (saved %s)", c.CreatedAt, w[0].CreatedAt)
	}
}
