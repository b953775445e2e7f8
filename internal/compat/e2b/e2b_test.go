package e2b

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/auth"
	"withruntime.dev/runtime/internal/compat/e2b/envd/filesystempb"
	"withruntime.dev/runtime/internal/store"
)

// tokenFixture is a store with two tenants' sandboxes and tokens, one of
// them stopped. The facade's API handler is a stub that fails the test:
// nothing may reach the API before the token is checked.
type tokenFixture struct {
	s                   *Server
	tokA, tokB, tokGone string
	idA, idB, idGone    string
	keyA                store.Key
	apiCalls            int
	lastPath            string
}

func newTokenFixture(t *testing.T) *tokenFixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &tokenFixture{idA: "sbx_aaaa", idB: "sbx_bbbb", idGone: "sbx_gone"}
	keyA, _, err := auth.NewKey(ctx, st, "a", 1000)
	if err != nil {
		t.Fatal(err)
	}
	keyB, _, err := auth.NewKey(ctx, st, "b", 1000)
	if err != nil {
		t.Fatal(err)
	}
	f.keyA = keyA
	now := time.Now()
	for _, sb := range []store.Sandbox{
		{ID: f.idA, KeyID: keyA.ID, State: store.StateRunning},
		{ID: f.idB, KeyID: keyB.ID, State: store.StateRunning},
		{ID: f.idGone, KeyID: keyA.ID, State: store.StateRunning},
	} {
		sb.Template, sb.CreatedAt, sb.LeaseEndsAt, sb.Driver = "base", now, now.Add(time.Hour), "gvisor"
		if err := st.InsertSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	f.s = New(Config{Store: st, API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.apiCalls++
		f.lastPath = r.URL.Path
		http.Error(w, "stub", http.StatusTeapot)
	})})
	for _, x := range []struct {
		id  string
		tok *string
	}{{f.idA, &f.tokA}, {f.idB, &f.tokB}} {
		if *x.tok, err = f.s.mintToken(ctx, x.id, "base"); err != nil {
			t.Fatal(err)
		}
	}
	if f.tokGone, err = f.s.mintToken(ctx, f.idA, "base"); err != nil {
		t.Fatal(err)
	}
	if err := st.InsertE2BToken(ctx, store.E2BToken{Hash: hashToken("wre2b_gone"), SandboxID: f.idGone, Template: "base", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkStopped(ctx, f.idGone, "deleted", now); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *tokenFixture) envd(t *testing.T, path, token, sandboxID string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("POST", path, strings.NewReader(`{"path":"/etc"}`))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("X-Access-Token", token)
	}
	if sandboxID != "" {
		req.Header.Set("E2b-Sandbox-Id", sandboxID)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	f.s.ServeHTTP(rec, req)
	return rec
}

// TestDataPlaneTokens: a token opens its own sandbox only; anything else
// is refused before the API is reached, and says nothing of whether the
// sandbox exists.
func TestDataPlaneTokens(t *testing.T) {
	f := newTokenFixture(t)
	stat := "/filesystem.Filesystem/Stat"
	for _, c := range []struct {
		name, token, id string
		status          int
	}{
		{"no token", "", f.idA, 401},
		{"made-up token", "wre2b_made_up", f.idA, 401},
		{"another tenant's sandbox's token", f.tokB, f.idA, 401},
		{"a token for a sandbox id that does not exist", f.tokA, "sbx_nosuch", 401},
		{"a stopped sandbox", "wre2b_gone", f.idGone, 502},
	} {
		rec := f.envd(t, stat, c.token, c.id)
		if rec.Code != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, rec.Code, c.status, rec.Body)
		}
		var body e2bError
		if json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Code != c.status || body.Message == "" {
			t.Errorf("%s: body %s is not E2B's {code, message}", c.name, rec.Body)
		}
	}
	if f.apiCalls != 0 {
		t.Fatalf("refused requests reached the API %d times", f.apiCalls)
	}
	// A valid token reaches the API, as its sandbox's owner; the JS SDK's
	// file requests without E2b-Sandbox-Id route by the token alone.
	for _, id := range []string{f.idA, ""} {
		f.envd(t, stat, f.tokA, id)
	}
	f.envd(t, stat, f.tokGone, f.idA) // a second token of the same sandbox works too
	if f.apiCalls != 3 {
		t.Fatalf("valid tokens reached the API %d times, want 3", f.apiCalls)
	}
	// Another user than user or root is refused before the API.
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("mallory:"))
	if rec := f.envd(t, stat, f.tokA, f.idA, "Authorization", basic); rec.Code != 400 {
		t.Errorf("unknown user: status %d: %s", rec.Code, rec.Body)
	}
	// An unknown procedure is a Connect unimplemented error once the token
	// is good, and the token's 401 before.
	if rec := f.envd(t, "/process.Process/Nope", f.tokA, f.idA); rec.Code != 501 || !strings.Contains(rec.Body.String(), `"unimplemented"`) {
		t.Errorf("unknown procedure: %d %s", rec.Code, rec.Body)
	}
	if rec := f.envd(t, "/process.Process/Nope", "", f.idA); rec.Code != 401 {
		t.Errorf("unknown procedure without a token: %d", rec.Code)
	}
	// Another port is the API's port relay, as the owner.
	calls := f.apiCalls
	if rec := f.envd(t, stat, f.tokA, f.idA, "E2b-Sandbox-Port", "8080"); rec.Code != http.StatusTeapot || f.apiCalls != calls+1 ||
		f.lastPath != "/v1/sandboxes/"+f.idA+"/ports/8080/" {
		t.Errorf("other port: %d %s, API saw %q", rec.Code, rec.Body, f.lastPath)
	}
}

// TestTokensStoredHashed: the database holds no token, only its SHA-256.
func TestTokensStoredHashed(t *testing.T) {
	f := newTokenFixture(t)
	if _, err := f.s.cfg.Store.E2BTokenByHash(context.Background(), f.tokA); err == nil {
		t.Fatal("a token is found by its own value")
	}
	tok, err := f.s.cfg.Store.E2BTokenByHash(context.Background(), hashToken(f.tokA))
	if err != nil || tok.SandboxID != f.idA {
		t.Fatalf("token by hash: %+v %v", tok, err)
	}
}

// TestWatcherOfAnotherSandbox: a watcher id is found only with the token
// of the sandbox it watches.
func TestWatcherOfAnotherSandbox(t *testing.T) {
	ws := newWatchers()
	ws.m["w1"] = &watcher{sandbox: "sbx_a", cancel: func() {}}
	if _, err := ws.get("sbx_b", "w1"); err == nil {
		t.Fatal("sandbox b got sandbox a's watcher")
	}
	if _, err := ws.get("sbx_a", "w1"); err != nil {
		t.Fatal(err)
	}
}

func TestPolicy(t *testing.T) {
	f, tr := false, true
	for _, c := range []struct {
		name    string
		allow   *bool
		net     *networkConfig
		want    api.NetworkPolicy
		wantErr string
	}{
		{name: "E2B's default is internet", want: api.NetworkPolicy{Internet: true}},
		{name: "no internet", allow: &f, want: api.NetworkPolicy{}},
		{name: "allow list", net: &networkConfig{AllowOut: []string{"example.com"}, DenyOut: []string{"0.0.0.0/0"}},
			want: api.NetworkPolicy{Allow: []string{"example.com"}}},
		{name: "allow list without internet", allow: &f, net: &networkConfig{AllowOut: []string{"*.example.org"}},
			want: api.NetworkPolicy{Allow: []string{"*.example.org"}}},
		{name: "deny some", allow: &tr, net: &networkConfig{DenyOut: []string{"203.0.113.0/24", "198.51.100.7"}},
			want: api.NetworkPolicy{Internet: true, Deny: []string{"203.0.113.0/24", "198.51.100.7"}}},
		{name: "deny a name", net: &networkConfig{DenyOut: []string{"example.com"}}, wantErr: "not a CIDR"},
		{name: "allow inside deny", net: &networkConfig{AllowOut: []string{"203.0.113.9"}, DenyOut: []string{"203.0.113.0/24"}}, wantErr: "inside denyOut"},
		{name: "rules", net: &networkConfig{Rules: json.RawMessage(`{"api.example.com":{}}`)}, wantErr: "not supported"},
		{name: "dns servers", net: &networkConfig{DNSServers: []string{"8.8.8.8"}}, wantErr: "not supported"},
	} {
		got, err := policy(c.allow, c.net)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.wantErr)
			}
			continue
		}
		if err != nil || got.Internet != c.want.Internet || !slices.Equal(got.Allow, c.want.Allow) || !slices.Equal(got.Deny, c.want.Deny) {
			t.Errorf("%s: %+v %v, want %+v", c.name, got, err, c.want)
		}
	}
}

func TestNewSandboxRefusesWhatRuntimeLacks(t *testing.T) {
	no := false
	for _, n := range []newSandbox{
		{},
		{TemplateID: "base", VolumeMounts: []json.RawMessage{json.RawMessage(`{}`)}},
	} {
		if n.check() == nil {
			t.Errorf("%+v was accepted", n)
		}
	}
	// mcp is the SDK's to act on (it starts the gateway itself): accepted.
	for _, mcp := range []string{`null`, `{"x":{}}`} {
		if err := (&newSandbox{TemplateID: "base", MCP: json.RawMessage(mcp)}).check(); err != nil {
			t.Errorf("mcp %s: %v", mcp, err)
		}
	}
	// A filesystem-only lease-end pause is Runtime's pauseMode filesystem.
	if err := (&newSandbox{TemplateID: "base", AutoPause: true, AutoPauseMemory: &no}).check(); err != nil {
		t.Error(err)
	}
}

func TestPaths(t *testing.T) {
	u, r := target{user: "user"}, target{user: "root"}
	for _, c := range []struct {
		t        target
		in, want string
	}{
		{u, "", "/home/user"}, {u, "a/b", "/home/user/a/b"}, {u, "~/x", "/home/user/x"}, {u, "/tmp/../etc", "/etc"},
		{r, "x", "/root/x"}, {u, "../../etc/passwd", "/etc/passwd"},
	} {
		if got := c.t.abs(c.in); got != c.want {
			t.Errorf("%s abs(%q) = %q, want %q", c.t.user, c.in, got, c.want)
		}
	}
}

func TestEndEventAndEntry(t *testing.T) {
	end := endEvent(agentapi.ExecResult{ExitCode: 137, Signal: "SIGKILL"})
	if end.ExitCode != -1 || end.Exited || end.Status != "signal: killed" {
		t.Errorf("killed: %+v", end)
	}
	if end := endEvent(agentapi.ExecResult{ExitCode: 3}); end.ExitCode != 3 || !end.Exited || end.Status != "exit status 3" {
		t.Errorf("exit 3: %+v", end)
	}
	e := entryInfo(agentapi.FileInfo{Name: "d", Path: "/d", Type: "dir", Mode: "0755", Uid: 1000, Gid: 0})
	if e.Type != filesystempb.FileType_FILE_TYPE_DIRECTORY || e.Permissions != "drwxr-xr-x" || e.Mode != 0o755 || e.Owner != "user" || e.Group != "root" {
		t.Errorf("entry: %+v", e)
	}
}

// TestControlKeyBeforeBody: the control plane checks the API key before it
// reads the body, as E2B's does: an unknown key sending a body that is not
// JSON is 401, not 400, and nothing reaches the API.
func TestControlKeyBeforeBody(t *testing.T) {
	f := newTokenFixture(t)
	for _, c := range []struct {
		method, path, body string
	}{
		{"POST", "/sandboxes", `{not json`},
		{"POST", "/v2/sandboxes", `{"templateID": 7}`},
		{"POST", "/sandboxes/" + f.idA + "/timeout", `{"timeout": "soon"}`},
		{"GET", "/sandboxes", ``},
	} {
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		req.Header.Set("X-API-KEY", "wr_notakeyofthisserver0000000000")
		rec := httptest.NewRecorder()
		f.s.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "unknown API key") {
			t.Errorf("%s %s with an unknown key: %d %s, want 401 unknown API key", c.method, c.path, rec.Code, rec.Body)
		}
	}
	if f.apiCalls != 0 {
		t.Errorf("%d calls reached the API", f.apiCalls)
	}
}

// TestHealthOfPausedSandbox: envd's /health answers 502 for a paused
// sandbox, as E2B's proxy does, so the SDKs' is_running() says false; 204
// again once it runs.
func TestHealthOfPausedSandbox(t *testing.T) {
	f := newTokenFixture(t)
	health := func() int {
		req := httptest.NewRequest("GET", "/health", nil)
		req.Header.Set("X-Access-Token", f.tokA)
		rec := httptest.NewRecorder()
		f.s.ServeHTTP(rec, req)
		return rec.Code
	}
	if c := health(); c != http.StatusNoContent {
		t.Fatalf("health of a running sandbox: %d", c)
	}
	ctx := context.Background()
	if err := f.s.cfg.Store.MarkPaused(ctx, f.idA, time.Now(), 1<<20, ""); err != nil {
		t.Fatal(err)
	}
	if c := health(); c != http.StatusBadGateway {
		t.Errorf("health of a paused sandbox: %d, want 502", c)
	}
	if err := f.s.cfg.Store.MarkResumed(ctx, f.idA, time.Now().Add(time.Hour), nil, store.CPUMark{}); err != nil {
		t.Fatal(err)
	}
	if c := health(); c != http.StatusNoContent {
		t.Errorf("health of a resumed sandbox: %d, want 204", c)
	}
}

func TestCheckMaskHost(t *testing.T) {
	for _, ok := range []string{"custom-host.example.com:${PORT}", "${PORT}-app.example.com", "10.0.0.1", "[::1]:${PORT}", "example.com"} {
		if err := checkMaskHost(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"http://example.com", "example.com/path", "a b", "host\r\nX-Injected: 1", "user@host", "", ":80", "example.com:port"} {
		if checkMaskHost(bad) == nil {
			t.Errorf("%q was taken", bad)
		}
	}
}
