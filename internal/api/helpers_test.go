package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/auth"
	"withruntime.dev/runtime/internal/sandbox"
	"withruntime.dev/runtime/internal/store"
	"withruntime.dev/runtime/internal/template"
)

// testAPI is the real API over a real SQLite store and a real manager that
// never boots a sandbox: its template directory is empty, so every create
// stops at the template lookup, and no sandbox exists for the
// sandbox-scoped routes to reach (they answer 404 once the request passed
// the server's checks). The manager has no driver: nothing valid or not
// can reach one, and should anything try, the panic fails the test.
type testAPI struct {
	srv   *httptest.Server
	key   string // an admin key
	store *store.Store
}

func newTestAPI(t testing.TB) *testAPI {
	t.Helper()
	return newTestAPIWith(t, nil)
}

// newTestAPIWith is newTestAPI whose template routes answer from tpl
// (nil: the empty template directory).
func newTestAPIWith(t testing.TB, tpl Templates) *testAPI {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(context.Background(), filepath.Join(dir, "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mgr := sandbox.New(nil, st, &template.Store{Dir: filepath.Join(dir, "templates")}, sandbox.DefaultLimits(), log)
	_, key, err := auth.NewKey(context.Background(), st, "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	if tpl == nil {
		tpl = &template.Store{Dir: filepath.Join(dir, "templates")}
	}
	srv := httptest.NewServer(New(Config{Manager: mgr, Store: st, Templates: tpl, Log: log}))
	t.Cleanup(func() {
		srv.Close()
		mgr.Close()
		st.Close()
	})
	return &testAPI{srv: srv, key: key, store: st}
}

// do sends one request with the admin key, unless hdr (name, value pairs,
// which replace the headers of those names) sets Authorization, and returns
// the status and body.
func (a *testAPI) do(t testing.TB, method, path string, body []byte, hdr ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Del(hdr[i])
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	return a.doRequest(t, req)
}

// doRequest sends req and returns the status and body.
func (a *testAPI) doRequest(t testing.TB, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := a.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", req.Method, req.URL, err)
	}
	return resp.StatusCode, data
}

// tryRequest sends req; ok is false when the client refused to send it
// (an invalid header value, say).
func (a *testAPI) tryRequest(req *http.Request) (status int, data []byte, ok bool) {
	resp, err := a.srv.Client().Do(req)
	if err != nil {
		return 0, nil, false
	}
	defer resp.Body.Close()
	data, err = io.ReadAll(resp.Body)
	return resp.StatusCode, data, err == nil
}

// checkAnswer fails the test if status is a 5xx, or if an error status
// does not come with a JSON error body holding a code and a message.
func checkAnswer(t testing.TB, what string, status int, data []byte) {
	t.Helper()
	if status >= 500 {
		t.Fatalf("%s: %d %s", what, status, data)
	}
	if status < 400 {
		return
	}
	var eb agentapi.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
		t.Fatalf("%s: %d with a body that is not a JSON error: %q", what, status, data)
	}
}

// expect sends a request that must fail with status, and whose message
// must contain each of want.
func (a *testAPI) expect(t *testing.T, status int, method, path, body string, want ...string) {
	t.Helper()
	got, data := a.do(t, method, path, []byte(body))
	what := method + " " + path + " " + body
	if len(what) > 200 {
		what = what[:200] + "..."
	}
	checkAnswer(t, what, got, data)
	if got != status {
		t.Errorf("%s: %d %s, want %d", what, got, data, status)
		return
	}
	var eb agentapi.ErrorBody
	_ = json.Unmarshal(data, &eb)
	for _, w := range want {
		if !strings.Contains(eb.Error.Message, w) {
			t.Errorf("%s: %d %q, want a message containing %q", what, got, eb.Error.Message, w)
		}
	}
}
