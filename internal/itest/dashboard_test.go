package itest

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
)

// browser is a minimal HTTP client of the dashboard: a cookie jar, no
// redirects followed, the last page's CSRF token.
type browser struct {
	t       *testing.T
	base    string
	cookies map[string]*http.Cookie
	csrf    string
}

func (e *env) browser() *browser {
	return &browser{t: e.t, base: e.http.URL, cookies: map[string]*http.Cookie{}}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// req sends one request (form: a POST body) with the jar's cookies and hdr,
// keeps the cookies it sets, and returns the answer and its body.
func (b *browser) req(method, path string, form url.Values, hdr ...string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, c := range resp.Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	if m := csrfRE.FindStringSubmatch(string(data)); m != nil {
		b.csrf = m[1]
	}
	return resp, string(data)
}

// signIn signs in with key through the sign-in form.
func (b *browser) signIn(key string) *http.Cookie {
	b.t.Helper()
	b.req("GET", "/ui/login", nil)
	resp, body := b.req("POST", "/ui/login", url.Values{"csrf": {b.csrf}, "key": {key}, "next": {"/ui/sandboxes"}})
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("sign-in: %d %s", resp.StatusCode, body)
	}
	c := b.cookies["wr_session"]
	if c == nil {
		b.t.Fatalf("sign-in set no session cookie: %v", resp.Header["Set-Cookie"])
	}
	b.req("GET", "/ui/sandboxes", nil) // picks up the session's CSRF token
	return c
}

// TestDashboardSecurity: the dashboard's session cookie is HttpOnly,
// SameSite=Strict and scoped to /ui/; every page has a strict CSP and may
// not be framed; what came from inside a sandbox (metadata, a process's
// command line) is escaped; a forged cookie, a form without the session's
// CSRF token and a cross-site form post are refused and change nothing; a
// tenant key sees only what the API shows it; a revoked key's session ends.
func TestDashboardSecurity(t *testing.T) {
	e := newEnv(t)
	evil := `"><script>alert(1)</script><img src=x onerror=alert(2)>`
	sb := e.create(api.CreateSandboxRequest{Metadata: map[string]string{"owner": evil}})
	e.must(http.StatusCreated, "POST", "/v1/sandboxes/"+sb.ID+"/processes",
		agentapi.ExecRequest{Command: "sleep 600 # <b>bold</b><script>alert(3)</script>"}, nil)

	anon := e.browser()
	if resp, _ := anon.req("GET", "/ui/sandboxes", nil); resp.StatusCode != http.StatusSeeOther ||
		!strings.HasPrefix(resp.Header.Get("Location"), "/ui/login?next=") {
		t.Errorf("a page without a session: %d to %q, want 303 to the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, body := anon.req("POST", "/ui/login", url.Values{"key": {e.key}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("sign-in without the form's token: %d %s, want 403", resp.StatusCode, body)
	}
	anon.req("GET", "/ui/login", nil)
	if resp, body := anon.req("POST", "/ui/login", url.Values{"csrf": {anon.csrf}, "key": {"wr_forged"}}); resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(body, "not accepted") {
		t.Errorf("sign-in with a wrong key: %d, want 401 saying so", resp.StatusCode)
	}

	admin := e.browser()
	c := admin.signIn(e.key)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui/" || c.MaxAge != 0 {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui/, a session cookie", c)
	}
	resp, body := admin.req("GET", "/ui/sandboxes/"+sb.ID, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sandbox page: %d %s", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") ||
		!strings.Contains(csp, "frame-ancestors 'none'") || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("headers: CSP %q, X-Frame-Options %q", csp, resp.Header.Get("X-Frame-Options"))
	}
	for _, raw := range []string{"<script>alert", "<img src=x", "<b>bold</b>"} {
		if strings.Contains(body, raw) {
			t.Errorf("the sandbox page renders %q from inside the sandbox unescaped", raw)
		}
	}
	if !strings.Contains(body, "&lt;b&gt;bold&lt;/b&gt;") || !strings.Contains(body, "&lt;script&gt;alert(1)") {
		t.Errorf("the sandbox page does not show the process and metadata escaped:\n%s", body)
	}
	if _, list := admin.req("GET", "/ui/sandboxes/rows", nil); strings.Contains(list, "<script>alert") || !strings.Contains(list, sb.ID) {
		t.Errorf("the live rows: %s", list)
	}

	kill := url.Values{"csrf": {admin.csrf}}
	running := func() bool {
		var got api.Sandbox
		e.must(http.StatusOK, "GET", "/v1/sandboxes/"+sb.ID, nil, &got)
		return got.State == "running"
	}
	forged := e.browser()
	forged.cookies["wr_session"] = &http.Cookie{Name: "wr_session", Value: "forged-session-token"}
	if resp, _ := forged.req("POST", "/ui/sandboxes/"+sb.ID+"/kill", kill); resp.StatusCode != http.StatusForbidden {
		t.Errorf("kill with a forged session cookie: %d, want 403", resp.StatusCode)
	}
	if resp, _ := forged.req("GET", "/ui/sandboxes", nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a page with a forged session cookie: %d, want 303 to sign in", resp.StatusCode)
	}
	if resp, _ := admin.req("POST", "/ui/sandboxes/"+sb.ID+"/kill", url.Values{}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("kill without the CSRF token: %d, want 403", resp.StatusCode)
	}
	for _, hdr := range [][]string{{"Sec-Fetch-Site", "cross-site"}, {"Origin", "https://evil.example"}} {
		if resp, _ := admin.req("POST", "/ui/sandboxes/"+sb.ID+"/kill", kill, hdr...); resp.StatusCode != http.StatusForbidden {
			t.Errorf("cross-site kill (%s: %s): %d, want 403", hdr[0], hdr[1], resp.StatusCode)
		}
	}
	other := e.browser()
	var tenant api.Key
	e.must(http.StatusCreated, "POST", "/v1/keys", api.CreateKeyRequest{Name: "tenant", DailyLimitMicros: 1_000_000}, &tenant)
	other.signIn(tenant.Secret)
	if resp, _ := admin.req("POST", "/ui/sandboxes/"+sb.ID+"/kill", url.Values{"csrf": {other.csrf}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("kill with another session's CSRF token: %d, want 403", resp.StatusCode)
	}
	if !running() {
		t.Fatal("a refused kill stopped the sandbox")
	}

	// The tenant sees only what the API shows it.
	if _, list := other.req("GET", "/ui/sandboxes", nil); strings.Contains(list, sb.ID) {
		t.Errorf("a tenant's list shows another key's sandbox")
	}
	if resp, _ := other.req("GET", "/ui/sandboxes/"+sb.ID, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a tenant opening another key's sandbox: %d, want 404", resp.StatusCode)
	}
	if resp, _ := other.req("POST", "/ui/sandboxes/"+sb.ID+"/kill", url.Values{"csrf": {other.csrf}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a tenant killing another key's sandbox: %d, want 404", resp.StatusCode)
	}
	if resp, body := other.req("GET", "/ui/keys", nil); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "cannot manage keys") {
		t.Errorf("a tenant on the keys page: %d, want the API's 403", resp.StatusCode)
	}
	if resp, _ := other.req("GET", "/ui/device?code=BCDF-GHJK", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a tenant approving device logins: %d, want 403", resp.StatusCode)
	}
	if !running() {
		t.Fatal("a tenant stopped another key's sandbox")
	}

	// Device page: an unknown code is a clear 404.
	if resp, body := admin.req("GET", "/ui/device?code=BCDF-GHJK", nil); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "no device login has the user code") {
		t.Errorf("unknown user code: %d", resp.StatusCode)
	}

	// A revoked key's session ends.
	e.must(http.StatusNoContent, "DELETE", "/v1/keys/"+tenant.ID, nil, nil)
	if resp, _ := other.req("GET", "/ui/sandboxes", nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("session of a revoked key: %d, want 303 to sign in", resp.StatusCode)
	}

	// The real kill.
	if resp, body := admin.req("POST", "/ui/sandboxes/"+sb.ID+"/kill", kill); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("kill: %d %s", resp.StatusCode, body)
	}
	if running() {
		t.Error("the sandbox still runs after the dashboard killed it")
	}
	if resp, _ := admin.req("POST", "/ui/logout", url.Values{"csrf": {admin.csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("sign out: %d", resp.StatusCode)
	}
	admin.cookies["wr_session"] = c // the old cookie, replayed
	if resp, _ := admin.req("GET", "/ui/sandboxes", nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a signed-out session's cookie still works: %d", resp.StatusCode)
	}
}

// TestDashboardVolumes: the Volumes page lists the signed-in key's volumes
// with their size, the bytes their files take and the sandboxes that mount
// them; a tenant sees only its own (what GET /v1/volumes answers it).
func TestDashboardVolumes(t *testing.T) {
	e := newEnv(t)
	e.createVolume("dashvol", 32)
	e.must(http.StatusOK, "PUT", "/v1/volumes/dashvol/files?path=blob", strings.Repeat("x", 300<<10), nil)
	sb := e.create(withVolumes(api.VolumeMount{Name: "dashvol", Path: "/data"}))
	var v api.Volume
	e.must(http.StatusOK, "GET", "/v1/volumes/dashvol", nil, &v)
	tenant := e.asTenant("dash-tenant")
	tenant.createVolume("tenantvol", 16)

	admin := e.browser()
	admin.signIn(e.key)
	resp, body := admin.req("GET", "/ui/volumes", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("volumes page: %d %s", resp.StatusCode, body)
	}
	row := regexp.MustCompile(`(?s)<tr data-volume="dashvol">.*?</tr>`).FindString(body)
	for _, want := range []string{v.ID, ">ready<", "32 MiB", humanSize(v.UsedBytes) + " of " + humanSize(v.CapacityBytes), `href="/ui/sandboxes/` + sb.ID + `"`} {
		if !strings.Contains(row, want) {
			t.Errorf("the dashvol row does not show %q:\n%s", want, row)
		}
	}
	if v.UsedBytes < 300<<10 {
		t.Errorf("usedBytes %d after a 300 KiB upload", v.UsedBytes)
	}
	if strings.Contains(body, "tenantvol") || !strings.Contains(body, `href="/ui/volumes" class="on"`) {
		t.Errorf("the administrator's page shows a tenant's volume, or no Volumes menu entry:\n%s", body)
	}

	other := e.browser()
	other.signIn(tenant.key)
	_, body = other.req("GET", "/ui/volumes", nil)
	if !strings.Contains(body, `<tr data-volume="tenantvol">`) || strings.Contains(body, "dashvol") || !strings.Contains(body, "16 MiB") {
		t.Errorf("the tenant's page:\n%s", body)
	}
}

// humanSize is the dashboard's "bytes" formatting (1024-based, one decimal).
func humanSize(n int64) string {
	f := float64(n)
	for _, u := range []string{"B", "KiB", "MiB", "GiB"} {
		if f < 1024 || u == "GiB" {
			return fmt.Sprintf("%.1f %s", f, u)
		}
		f /= 1024
	}
	return ""
}

// TestDashboardSnapshots: a sandbox's page lists the snapshots taken of
// it with their size and cost, the snapshots page lists the key's; a
// tenant's pages show its own snapshots and no other key's.
func TestDashboardSnapshots(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	e.sh(sb.ID, "head -c 2000000 /dev/urandom > /workspace/blob")
	sn := e.snapshot(sb.ID, api.CreateSnapshotRequest{Mode: "filesystem", Name: "dash-files"})
	tenant := e.asTenant("dash-snap-tenant")
	tsb := tenant.create(api.CreateSandboxRequest{})
	tsn := tenant.snapshot(tsb.ID, api.CreateSnapshotRequest{Mode: "filesystem"})

	admin := e.browser()
	admin.signIn(e.key)
	resp, body := admin.req("GET", "/ui/sandboxes/"+sb.ID, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sandbox page: %d %s", resp.StatusCode, body)
	}
	row := regexp.MustCompile(`(?s)<tr data-snapshot="` + sn.ID + `">.*?</tr>`).FindString(body)
	for _, want := range []string{"dash-files", "filesystem", humanSize(sn.Bytes), `title="` + strconv.FormatInt(sn.Bytes, 10) + ` bytes"`, "micro-dollars"} {
		if !strings.Contains(row, want) {
			t.Errorf("the sandbox page's snapshot row lacks %q:\n%s", want, row)
		}
	}
	if strings.Contains(body, tsn.ID) {
		t.Errorf("the sandbox page lists another sandbox's snapshot")
	}
	_, body = admin.req("GET", "/ui/snapshots", nil)
	if !strings.Contains(body, `<tr data-snapshot="`+sn.ID+`">`) || !strings.Contains(body, `href="/ui/snapshots" class="on"`) {
		t.Errorf("the snapshots page:\n%s", body)
	}

	other := e.browser()
	other.signIn(tenant.key)
	_, body = other.req("GET", "/ui/snapshots", nil)
	if !strings.Contains(body, `<tr data-snapshot="`+tsn.ID+`">`) || strings.Contains(body, sn.ID) {
		t.Errorf("the tenant's snapshots page:\n%s", body)
	}
}
