package e2b

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestDomainRouting: with a domain, api.D is the control plane,
// 49983-SANDBOX.D the data plane (the token must be that sandbox's), any
// other PORT-SANDBOX.D the API's port relay — public, or behind the
// sandbox's traffic access token — and other names of D are 404.
func TestDomainRouting(t *testing.T) {
	f := newTokenFixture(t)
	f.s.cfg.Domain = "d.test"
	ctx := context.Background()
	if err := f.s.cfg.Store.SetE2BTraffic(ctx, f.idB, true); err != nil {
		t.Fatal(err)
	}
	if err := f.s.cfg.Store.SetE2BTraffic(ctx, f.idA, false); err != nil {
		t.Fatal(err)
	}
	a, b := e2bID(f.idA), e2bID(f.idB)
	do := func(host, path string, hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "https://"+host+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		f.s.ServeHTTP(rec, r)
		return rec
	}
	for _, c := range []struct {
		what, host, path string
		hdr              []string
		status           int
		apiPath          string
	}{
		{"api host without a key", "api.d.test", "/sandboxes", nil, 401, ""},
		{"unknown name", "www.d.test", "/", nil, 404, ""},
		{"the domain itself", "d.test:443", "/", nil, 404, ""},
		{"a port that is not a number", "x-" + a + ".d.test", "/", nil, 404, ""},
		{"envd with the host's token", "49983-" + a + ".d.test", "/health", []string{"X-Access-Token", f.tokA}, 204, ""},
		{"envd with another sandbox's token", "49983-" + b + ".d.test", "/health", []string{"X-Access-Token", f.tokA}, 401, ""},
		{"envd without a token", "49983-" + a + ".d.test", "/health", nil, 401, ""},
		{"a header naming another sandbox", "49983-" + a + ".d.test", "/health", []string{"X-Access-Token", f.tokA, "E2b-Sandbox-Id", b}, 400, ""},
		{"public port", "8000-" + b + ".d.test", "/x/y?z=1", nil, http.StatusTeapot, "/v1/sandboxes/" + f.idB + "/ports/8000/"},
		{"public port, Runtime's id form", "8000-" + f.idB + ".d.test", "/", nil, http.StatusTeapot, "/v1/sandboxes/" + f.idB + "/ports/8000/"},
		{"private port without a token", "8000-" + a + ".d.test", "/", nil, 403, ""},
		{"private port with another sandbox's token", "8000-" + a + ".d.test", "/", []string{"E2b-Traffic-Access-Token", f.tokB}, 403, ""},
		{"private port with its token", "8000-" + a + ".d.test", "/", []string{"E2b-Traffic-Access-Token", f.tokA}, http.StatusTeapot, "/v1/sandboxes/" + f.idA + "/ports/8000/"},
		{"a stopped sandbox's port", "8000-" + e2bID(f.idGone) + ".d.test", "/", nil, 502, ""},
		{"a sandbox that does not exist", "8000-nosuch.d.test", "/", nil, 502, ""},
	} {
		f.lastPath = ""
		rec := do(c.host, c.path, c.hdr...)
		if rec.Code != c.status || f.lastPath != c.apiPath {
			t.Errorf("%s: %d %s, API saw %q", c.what, rec.Code, rec.Body, f.lastPath)
		}
	}
	// A stopped sandbox's port answers as E2B's proxy does, word for word.
	var body struct {
		Code      int    `json:"code"`
		Message   string `json:"message"`
		SandboxID string `json:"sandboxId"`
	}
	rec := do("8000-"+e2bID(f.idGone)+".d.test", "/")
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Code != 502 ||
		body.Message != "The sandbox was not found" || body.SandboxID != e2bID(f.idGone) {
		t.Errorf("a stopped sandbox's port: %s", rec.Body)
	}
}
