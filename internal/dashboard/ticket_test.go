package dashboard

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/store"
)

// testDashboard is a dashboard on a fresh SQLite store whose clock the test
// moves, with one key and two sessions of it.
type testDashboard struct {
	d      *Dashboard
	st     *store.Store
	mu     sync.Mutex
	now    time.Time
	s1, s2 *signed
}

func newTestDashboard(t *testing.T, apiHandler http.Handler) *testDashboard {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	td := &testDashboard{st: st, now: time.UnixMilli(1_700_000_000_000).UTC()}
	td.d, err = New(Config{API: apiHandler, Store: st, Now: func() time.Time {
		td.mu.Lock()
		defer td.mu.Unlock()
		return td.now
	}})
	if err != nil {
		t.Fatal(err)
	}
	key := store.Key{ID: "key_1", Name: "one", Prefix: "wr_one", Hash: "h-key_1", CreatedAt: td.now}
	if err := st.InsertKey(ctx, key, 0); err != nil {
		t.Fatal(err)
	}
	for _, s := range []**signed{&td.s1, &td.s2} {
		tok := newToken()
		if err := st.InsertSession(ctx, store.Session{TokenHash: hashToken(tok), KeyID: key.ID, CreatedAt: td.now, ExpiresAt: td.now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		*s = &signed{key: key, token: tok, csrf: csrfFor(tok)}
	}
	return td
}

func (td *testDashboard) advance(d time.Duration) {
	td.mu.Lock()
	defer td.mu.Unlock()
	td.now = td.now.Add(d)
}

// A ticket opens the terminal it was made for, once, for its session, within
// its 30 s; every other use is refused with errTicket and a message that
// says why, and spends it.
func TestTicket(t *testing.T) {
	td := newTestDashboard(t, nil)
	ctx := context.Background()
	mint := func(s *signed, id string, pid int) string {
		t.Helper()
		tok, err := td.d.mintTicket(ctx, s, id, pid)
		if err != nil || len(tok) != 43 {
			t.Fatalf("mint: %q %v", tok, err)
		}
		return tok
	}
	refused := func(what string, err error, want string) {
		t.Helper()
		if !errors.Is(err, errTicket) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a refusal saying %q", what, err, want)
		}
	}

	tok := mint(td.s1, "sbx_a", 7)
	if err := td.d.redeemTicket(ctx, tok, td.s1, "sbx_a", 7); err != nil {
		t.Fatalf("a fresh ticket: %v", err)
	}
	refused("the same ticket again", td.d.redeemTicket(ctx, tok, td.s1, "sbx_a", 7), "used already")

	cases := []struct {
		what    string
		s       *signed
		id      string
		pid     int
		advance time.Duration
		want    string
	}{
		{"another sandbox", td.s1, "sbx_b", 7, 0, "made for another terminal (sandbox sbx_a, process 7)"},
		{"another process", td.s1, "sbx_a", 8, 0, "made for another terminal"},
		{"another session of the same key", td.s2, "sbx_a", 7, 0, "another session"},
		{"after 30 s", td.s1, "sbx_a", 7, ticketTTL, "expired"},
	}
	for _, c := range cases {
		tok := mint(td.s1, "sbx_a", 7)
		td.advance(c.advance)
		refused(c.what, td.d.redeemTicket(ctx, tok, c.s, c.id, c.pid), c.want)
		refused(c.what+", then where it belongs", td.d.redeemTicket(ctx, tok, td.s1, "sbx_a", 7), "used already")
	}
	just := mint(td.s1, "sbx_a", 7)
	td.advance(ticketTTL - time.Millisecond)
	if err := td.d.redeemTicket(ctx, just, td.s1, "sbx_a", 7); err != nil {
		t.Errorf("a ticket 1 ms before it expires: %v", err)
	}

	refused("no ticket", td.d.redeemTicket(ctx, "", td.s1, "sbx_a", 7), "no terminal ticket")
	refused("a ticket never made", td.d.redeemTicket(ctx, newToken(), td.s1, "sbx_a", 7), "unknown")
	refused("a ticket too long", td.d.redeemTicket(ctx, strings.Repeat("A", 65), td.s1, "sbx_a", 7), "not one this dashboard makes")
	refused("a ticket with other characters", td.d.redeemTicket(ctx, "abc'--", td.s1, "sbx_a", 7), "not one this dashboard makes")
	if _, err := td.d.cfg.Store.TakeTerminalTicket(ctx, just); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the store is looked up by the ticket's hash, never the ticket: %v", err)
	}

	// A session holds at most maxTicketsPerSession unused tickets; another
	// session is not held back; expired ones make room again.
	for range maxTicketsPerSession {
		mint(td.s1, "sbx_a", 7)
	}
	if _, err := td.d.mintTicket(ctx, td.s1, "sbx_a", 7); !errors.Is(err, errTicket) || !strings.Contains(err.Error(), "has 16 terminal tickets") {
		t.Errorf("one ticket too many: %v", err)
	}
	mint(td.s2, "sbx_a", 7)
	td.advance(ticketTTL)
	mint(td.s1, "sbx_a", 7)
}

func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		hdr  []string
		want bool
	}{
		{nil, true}, // no browser page
		{[]string{"Origin", "http://dash.example:8080"}, true},
		{[]string{"Origin", "http://DASH.example:8080"}, true},
		{[]string{"Origin", "https://dash.example:8080"}, true}, // behind a TLS proxy
		{[]string{"Origin", "http://dash.example"}, false},      // another port is another origin
		{[]string{"Origin", "http://evil.example"}, false},
		{[]string{"Origin", "null"}, false},
		{[]string{"Origin", "http://dash.example:8080", "Sec-Fetch-Site", "same-origin"}, true},
		{[]string{"Origin", "http://dash.example:8080", "Sec-Fetch-Site", "same-site"}, false},
		{[]string{"Sec-Fetch-Site", "cross-site"}, false},
		{[]string{"Sec-Fetch-Site", "none"}, false},
	} {
		r := httptest.NewRequest("GET", "http://dash.example:8080/ui/sandboxes/x/processes/1/terminal", nil)
		for i := 0; i+1 < len(c.hdr); i += 2 {
			r.Header.Set(c.hdr[i], c.hdr[i+1])
		}
		if got := sameOrigin(r); got != c.want {
			t.Errorf("sameOrigin with %v = %v, want %v", c.hdr, got, c.want)
		}
	}
}

func TestCSPWithStyleNonce(t *testing.T) {
	csp := cspWithStyleNonce("abc_-123")
	if !strings.Contains(csp, "style-src 'self' 'nonce-abc_-123';") || strings.Contains(csp, "unsafe") ||
		strings.Replace(csp, " 'nonce-abc_-123'", "", 1) != CSP {
		t.Errorf("CSP with a style nonce: %q", csp)
	}
}

// The terminal WebSocket's checks, in order, before anything reaches the
// API: a WebSocket, from this origin, with a session, for a sandbox the
// API shows the session's key (else the API's own answer) and that is the
// key's own (else 403: an administrator's key sees every sandbox), with its
// ticket; what
// reaches the API is its terminal path, without the ticket and without the
// cookie.
func TestTerminalSocketChecks(t *testing.T) {
	var mu sync.Mutex
	var forwarded []*http.Request
	fakeAPI := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/sandboxes/sbx_mine", r.URL.Path == "/v1/sandboxes/sbx_tenants": // as an administrator's key sees them
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{}`)
		case strings.HasSuffix(r.URL.Path, "/terminal"):
			mu.Lock()
			forwarded = append(forwarded, r)
			mu.Unlock()
			w.WriteHeader(http.StatusTeapot)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no sandbox here"}}`)
		}
	})
	td := newTestDashboard(t, fakeAPI)
	ctx := context.Background()
	for id, key := range map[string]string{"sbx_mine": "key_1", "sbx_tenants": "key_2"} {
		if err := td.st.InsertSandbox(ctx, store.Sandbox{ID: id, KeyID: key, Template: "base", State: store.StateRunning,
			CreatedAt: td.now, LeaseEndsAt: td.now.Add(time.Hour), Driver: "gvisor"}); err != nil {
			t.Fatal(err)
		}
	}
	ws := func(path string, hdr ...string) (int, string) {
		r := httptest.NewRequest("GET", "http://dash.example"+path, nil)
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set("Origin", "http://dash.example")
		r.AddCookie(&http.Cookie{Name: sessionCookie, Value: td.s1.token})
		for i := 0; i+1 < len(hdr); i += 2 {
			if hdr[i+1] == "" {
				r.Header.Del(hdr[i])
			} else {
				r.Header.Set(hdr[i], hdr[i+1])
			}
		}
		w := httptest.NewRecorder()
		td.d.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	tok, err := td.d.mintTicket(ctx, td.s1, "sbx_mine", 5)
	if err != nil {
		t.Fatal(err)
	}
	path := "/ui/sandboxes/sbx_mine/processes/5/terminal?ticket=" + tok
	for _, c := range []struct {
		what   string
		path   string
		hdr    []string
		status int
		want   string
	}{
		{"not a WebSocket", path, []string{"Upgrade", ""}, http.StatusBadRequest, "WebSocket"},
		{"another origin", path, []string{"Origin", "http://evil.example"}, http.StatusForbidden, "another site"},
		{"no session", path, []string{"Cookie", ""}, http.StatusForbidden, "not signed in"},
		{"a forged session", path, []string{"Cookie", sessionCookie + "=forged"}, http.StatusForbidden, "not signed in"},
		{"another key's sandbox (the API's 404)", "/ui/sandboxes/sbx_theirs/processes/5/terminal?ticket=" + tok, nil, http.StatusNotFound, "no sandbox here"},
		{"another key's sandbox that this key sees", "/ui/sandboxes/sbx_tenants/processes/5/terminal?ticket=" + tok, nil, http.StatusForbidden, "belongs to another key (key_2)"},
		{"no ticket", "/ui/sandboxes/sbx_mine/processes/5/terminal", nil, http.StatusForbidden, "no terminal ticket"},
	} {
		if st, body := ws(c.path, c.hdr...); st != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %q, want %d saying %q", c.what, st, body, c.status, c.want)
		}
	}
	if len(forwarded) != 0 {
		t.Fatalf("refused WebSockets reached the API: %d", len(forwarded))
	}
	// None of the refusals spent the ticket.
	if st, _ := ws(path); st != http.StatusTeapot || len(forwarded) != 1 {
		t.Fatalf("the ticket after the refusals: %d, %d forwarded", st, len(forwarded))
	}
	fwd := forwarded[0]
	if fwd.URL.Path != "/v1/sandboxes/sbx_mine/processes/5/terminal" || fwd.URL.RawQuery != "" || fwd.RequestURI != fwd.URL.Path ||
		fwd.Header.Get("Cookie") != "" || fwd.Header.Get("Upgrade") != "websocket" || fwd.Header.Get("Origin") != "http://dash.example" {
		t.Errorf("forwarded as %s %q (query %q), cookie %q, upgrade %q, origin %q", fwd.Method, fwd.URL.Path, fwd.URL.RawQuery,
			fwd.Header.Get("Cookie"), fwd.Header.Get("Upgrade"), fwd.Header.Get("Origin"))
	}
	if st, body := ws(path); st != http.StatusForbidden || !strings.Contains(body, "used already") {
		t.Errorf("the ticket a second time: %d %q", st, body)
	}
}
