// Package itest holds the integration tests: each boots a real Runtime server
// with real gVisor sandboxes and drives it through the public HTTP API.
//
// Needs root, runsc (WITHRUNTIME_RUNSC, PATH or /usr/local/bin) and
// mmdebstrap for the first build of the base template, which is shared
// across runs in WITHRUNTIME_TEMPLATES_DIR (default
// /var/lib/withruntime/templates).
package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/driver/gvisor"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/server"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/internal/template"
)

var (
	agentBin     string
	runscBin     string
	templatesDir string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "itest: integration tests boot gVisor sandboxes and need root")
		return 1
	}
	tmp, err := os.MkdirTemp("", "itest-bin-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)
	agentBin = filepath.Join(tmp, "withruntime-agent")
	build := exec.Command("go", "build", "-o", agentBin, "withruntime.dev/runtime/cmd/withruntime-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "itest: building the agent: %v\n%s", err, out)
		return 1
	}
	runscBin = findRunsc()
	if runscBin == "" {
		fmt.Fprintln(os.Stderr, "itest: runsc not found; run scripts/install.sh or set WITHRUNTIME_RUNSC")
		return 1
	}
	templatesDir = os.Getenv("WITHRUNTIME_TEMPLATES_DIR")
	if templatesDir == "" {
		templatesDir = "/var/lib/withruntime/templates"
	}
	ts := &template.Store{Dir: templatesDir}
	if _, err := ts.Ensure(context.Background(), "base", func(p template.Progress) {
		if p.Done {
			fmt.Fprintf(os.Stderr, "itest: template base: %s (%.0fs)\n", p.Step, p.Elapsed.Seconds())
		}
	}); err != nil {
		fmt.Fprintf(os.Stderr, "itest: template base: %v\n", err)
		return 1
	}
	return m.Run()
}

func findRunsc() string {
	if p := os.Getenv("WITHRUNTIME_RUNSC"); p != "" {
		return p
	}
	if p, err := exec.LookPath("runsc"); err == nil {
		return p
	}
	return ""
}

// env is one running server for one test.
type env struct {
	t       *testing.T
	srv     *server.Server
	http    *httptest.Server
	dataDir string
	key     string
	// egress names this server's nftables table, namespaces and veths.
	egress server.EgressConfig
	// detached is set by detach: the server is closed, its sandboxes are
	// left for another server to adopt.
	detached bool
}

type option func(*server.Config)

func withLimits(f func(*sandbox.Limits)) option {
	return func(c *server.Config) {
		l := sandbox.DefaultLimits()
		if c.Limits != nil {
			l = *c.Limits
		}
		f(&l)
		c.Limits = &l
	}
}

func withDataDir(dir string) option { return func(c *server.Config) { c.DataDir = dir } }

func withMaxUpload(n int64) option { return func(c *server.Config) { c.MaxUploadBytes = n } }

// newEnv starts a server on a fresh data directory. At the end of the test
// it destroys every sandbox and checks that nothing was left on the host.
func newEnv(t *testing.T, opts ...option) *env {
	t.Helper()
	cfg := server.Config{
		TemplatesDir: templatesDir, Runsc: runscBin, Agent: agentBin,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, o := range opts {
		o(&cfg)
	}
	// A data directory of the test's own (withDataDir) is the test's to
	// remove; otherwise the env makes one and removes it.
	dir := ""
	if cfg.DataDir == "" {
		var err error
		if dir, err = os.MkdirTemp("/tmp", "wr-"); err != nil {
			t.Fatal(err)
		}
		cfg.DataDir = dir
	}
	// The server's own names for its data directory: parallel tests never
	// touch each other's networks, and the leak check knows what to look for.
	server.EgressNames(&cfg.Egress, cfg.DataDir)
	srv, err := server.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, srv: srv, http: httptest.NewServer(srv.Handler), dataDir: cfg.DataDir, key: srv.LocalKey, egress: cfg.Egress}
	t.Cleanup(func() {
		if e.detached {
			return
		}
		e.http.Close()
		e.srv.Manager.DestroyAll(context.Background())
		var ids []string
		if sbs, err := e.srv.Store.ListSandboxes(context.Background(), store.SandboxFilter{}); err == nil {
			for _, sb := range sbs {
				ids = append(ids, sb.ID)
			}
		}
		e.srv.Close()
		e.assertNoLeaks(ids...)
		destroyEgressTable(t, cfg.Egress)
		os.RemoveAll(dir)
	})
	return e
}

// detach closes the server the way a crash or an upgrade would: sandboxes
// keep running and nothing is cleaned up, for a later server on the same data
// directory (withDataDir) to adopt. The test's cleanup then skips this env,
// except for a last sweep that destroys whatever the data directory still
// runs (should the test fail before a later server cleaned up).
func (e *env) detach() {
	e.t.Helper()
	e.http.Close()
	if err := e.srv.Close(); err != nil {
		e.t.Errorf("closing the server: %v", err)
	}
	e.detached = true
	e.t.Cleanup(func() {
		d, err := gvisor.New(gvisor.Config{Runsc: runscBin, AgentBinary: agentBin, StateDir: filepath.Join(e.dataDir, "gvisor")})
		if err != nil {
			e.t.Errorf("sweeping %s: %v", e.dataDir, err)
			return
		}
		defer d.Close()
		ids, _ := d.List(context.Background())
		for _, id := range ids {
			e.t.Errorf("sandbox %s was left running after the test; destroying it", id)
			if err := d.Destroy(context.Background(), id); err != nil {
				e.t.Errorf("destroying %s: %v", id, err)
			}
		}
	})
}

// assertNoLeaks checks that no runsc container, sandbox directory, cgroup or
// mount of this server's sandboxes remains; ids are the sandboxes it knew.
func (e *env) assertNoLeaks(ids ...string) {
	e.t.Helper()
	out, _ := exec.Command(runscBin, "--root", filepath.Join(e.dataDir, "gvisor", "runsc"), "list", "--quiet").Output()
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		e.t.Errorf("leaked runsc containers: %v", ids)
	}
	entries, _ := os.ReadDir(filepath.Join(e.dataDir, "gvisor", "sandboxes"))
	for _, ent := range entries {
		e.t.Errorf("leaked sandbox directory: %s", ent.Name())
	}
	for _, id := range ids {
		for _, dir := range cgroupsOf(id) {
			e.t.Errorf("leaked cgroup: %s", dir)
		}
	}
	for _, m := range mountsUnder(e.dataDir) {
		e.t.Errorf("leaked mount: %s", m)
	}
	for _, l := range networkLeftovers(e.egress) {
		e.t.Errorf("leaked sandbox network: %s", l)
	}
}

// leftovers lists what sandbox id left on the host: its runsc container,
// its directory, its cgroups and mounts of its directory.
func (e *env) leftovers(id string) []string {
	var left []string
	if exec.Command(runscBin, "--root", filepath.Join(e.dataDir, "gvisor", "runsc"), "state", id).Run() == nil {
		left = append(left, "runsc container "+id)
	}
	dir := filepath.Join(e.dataDir, "gvisor", "sandboxes", id)
	if _, err := os.Lstat(dir); err == nil {
		left = append(left, "directory "+dir)
	}
	for _, cg := range cgroupsOf(id) {
		left = append(left, "cgroup "+cg)
	}
	for _, m := range mountsUnder(dir) {
		left = append(left, "mount "+m)
	}
	return left
}

// cgroupsOf lists the host cgroups of sandbox id (v1 controllers, v2).
func cgroupsOf(id string) []string {
	a, _ := filepath.Glob("/sys/fs/cgroup/*/withruntime/" + id)
	b, _ := filepath.Glob("/sys/fs/cgroup/withruntime/" + id)
	return append(a, b...)
}

// mountsUnder lists the mount points in this mount namespace at or under dir.
func mountsUnder(dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// do sends a request with the local key and returns status and body.
func (e *env) do(method, path string, body any, hdr ...string) (int, []byte) {
	e.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	case string:
		r = strings.NewReader(b)
	case io.Reader:
		r = b
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.http.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.key)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// must sends a request that must answer want, and decodes the body into out.
func (e *env) must(want int, method, path string, body, out any) {
	e.t.Helper()
	status, data := e.do(method, path, body)
	if status != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: decoding %s: %v", method, path, data, err)
		}
	}
}

func (e *env) create(req api.CreateSandboxRequest) api.Sandbox {
	e.t.Helper()
	var sb api.Sandbox
	e.must(http.StatusCreated, "POST", "/v1/sandboxes", req, &sb)
	return sb
}

func (e *env) exec(id string, req agentapi.ExecRequest) agentapi.ExecResult {
	e.t.Helper()
	var res agentapi.ExecResult
	e.must(http.StatusOK, "POST", "/v1/sandboxes/"+id+"/exec", req, &res)
	return res
}

func (e *env) sh(id, command string) agentapi.ExecResult {
	e.t.Helper()
	return e.exec(id, agentapi.ExecRequest{Command: command})
}

// errorCode decodes an error body's code.
func errorCode(t *testing.T, data []byte) string {
	t.Helper()
	var eb agentapi.ErrorBody
	if err := json.Unmarshal(data, &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
		t.Fatalf("not an error body: %s", data)
	}
	return eb.Error.Code
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ok() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", d, what)
}
