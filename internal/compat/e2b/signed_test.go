package e2b

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/auth"
	"withruntime.dev/runtime/internal/secretkey"
	"withruntime.dev/runtime/internal/store"
)

// TestSignedFileURLs: an E2B signed file URL, signed as the SDK signs it
// (with the access token), reaches the API for its own sandbox, path,
// operation and user only, until it expires and while the sandbox runs;
// every other is refused before the API sees it.
func TestSignedFileURLs(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runtime.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	k, err := secretkey.New()
	if err != nil {
		t.Fatal(err)
	}
	st.UseSecretsKeys(secretkey.NewRing(k))
	key, _, err := auth.NewKey(ctx, st, "a", 1000)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, id := range []string{"sbx_one", "sbx_two"} {
		if err := st.InsertSandbox(ctx, store.Sandbox{ID: id, KeyID: key.ID, State: store.StateRunning, Template: "base",
			CreatedAt: now, LeaseEndsAt: now.Add(time.Hour), Driver: "gvisor"}); err != nil {
			t.Fatal(err)
		}
	}
	var calls []string
	s := New(Config{Store: st, API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, r.Method+" "+r.URL.RequestURI())
		w.WriteHeader(http.StatusOK)
	})})
	tokOne, err := s.mintToken(ctx, "sbx_one", "base")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.mintToken(ctx, "sbx_two", "base"); err != nil {
		t.Fatal(err)
	}
	// A URL as the SDK makes it: path, operation, user, token, expiry.
	signed := func(path, op, user string, exp int64) url.Values {
		q := url.Values{"path": {path}}
		e := ""
		if exp != 0 {
			e = strconv.FormatInt(exp, 10)
			q.Set("signature_expiration", e)
		}
		if user != "" {
			q.Set("username", user)
		}
		q.Set("signature", fileSignature(path, op, user, tokOne, e))
		return q
	}
	do := func(method, sandbox string, q url.Values) int {
		req := httptest.NewRequest(method, "/files?"+q.Encode(), nil)
		if sandbox != "" {
			req.Header.Set("E2b-Sandbox-Id", sandbox)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec.Code
	}
	later := time.Now().Add(time.Hour).Unix()
	good := signed("/home/user/a.txt", "read", "", later)

	// The right URL reaches the API, as the owner, for that path.
	if code := do("GET", "one", good); code != http.StatusOK || len(calls) != 1 ||
		calls[0] != "GET /v1/sandboxes/sbx_one/files?path=%2Fhome%2Fuser%2Fa.txt" {
		t.Fatalf("a good URL: %d, calls %v", code, calls)
	}
	calls = nil
	up := signed("/home/user/up.txt", "write", "root", 0)
	if code := do("POST", "one", up); code == http.StatusUnauthorized || code == http.StatusForbidden {
		t.Fatalf("a good upload URL refused: %d", code)
	}
	calls = nil

	tampered := url.Values{}
	for k, v := range good {
		tampered[k] = v
	}
	sig := []byte(good.Get("signature"))
	sig[5] ^= 1
	tampered.Set("signature", string(sig))
	swapped := signed("/home/user/a.txt", "read", "", later)
	swapped.Set("path", "/home/user/b.txt")
	userSwap := signed("/home/user/a.txt", "read", "", later)
	userSwap.Set("username", "root")
	expSwap := signed("/home/user/a.txt", "read", "", later)
	expSwap.Set("signature_expiration", strconv.FormatInt(later+3600, 10))
	for _, c := range []struct {
		name, method, sandbox string
		q                     url.Values
		want                  int
	}{
		{"a tampered signature", "GET", "one", tampered, http.StatusUnauthorized},
		{"another path", "GET", "one", swapped, http.StatusUnauthorized},
		{"another user", "GET", "one", userSwap, http.StatusUnauthorized},
		{"a later expiry", "GET", "one", expSwap, http.StatusUnauthorized},
		{"a read URL used to write", "POST", "one", good, http.StatusUnauthorized},
		{"another sandbox", "GET", "two", good, http.StatusUnauthorized},
		{"no sandbox named", "GET", "", good, http.StatusUnauthorized},
		{"expired", "GET", "one", signed("/home/user/a.txt", "read", "", time.Now().Add(-time.Minute).Unix()), http.StatusUnauthorized},
		{"no signature at all", "GET", "one", url.Values{"path": {"/home/user/a.txt"}, "signature": {""}}, http.StatusUnauthorized},
	} {
		if code := do(c.method, c.sandbox, c.q); code != c.want {
			t.Errorf("%s: %d, want %d", c.name, code, c.want)
		}
	}
	// Another route takes no signature.
	req := httptest.NewRequest("POST", "/filesystem.Filesystem/ListDir?"+good.Encode(), nil)
	req.Header.Set("E2b-Sandbox-Id", "one")
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("a signature on an RPC: %d", rec.Code)
	}
	// The sandbox stops: its URLs stop with it.
	if err := st.MarkStopped(ctx, "sbx_one", "deleted", time.Now()); err != nil {
		t.Fatal(err)
	}
	if code := do("GET", "one", good); code != http.StatusBadGateway {
		t.Errorf("after the sandbox stopped: %d", code)
	}
	if len(calls) != 0 {
		t.Fatalf("refused URLs reached the API: %v", calls)
	}
}
