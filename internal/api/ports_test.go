package api

import (
	"net/http"
	"slices"
	"testing"
)

// TestRelayRewrites: cookies and redirects of a program in a sandbox stay
// under the relay's path (native) or with its host (E2B domain mode).
func TestRelayRewrites(t *testing.T) {
	const prefix = "/v1/sandboxes/sbx_a/ports/8000"
	h := http.Header{}
	h.Add("Set-Cookie", "a=1; Path=/app; Domain=.example.com; HttpOnly")
	h.Add("Set-Cookie", "b=2")
	h.Add("Set-Cookie", "c=3; domain=api.d.test; SameSite=Lax; path=/")
	h.Set("Location", "http://localhost:8000/login?x=1")
	underPrefix(h, prefix, "8000", "/", "api.test:7791")
	want := []string{
		"a=1; HttpOnly; Path=" + prefix + "/app",
		"b=2; Path=" + prefix + "/",
		"c=3; SameSite=Lax; Path=" + prefix + "/",
	}
	if got := h.Values("Set-Cookie"); !slices.Equal(got, want) {
		t.Errorf("native cookies:\n got %q\nwant %q", got, want)
	}
	if loc := h.Get("Location"); loc != prefix+"/login?x=1" {
		t.Errorf("Location %q", loc)
	}
	// Redirects resolve as the program sees itself (http://localhost:8000/
	// app/page); its own and the API's host land under the prefix with dot
	// segments (escaped too) resolved, so none walks out to the API's other
	// routes with the caller's key.
	for loc, want := range map[string]string{
		"/x":                                   prefix + "/x",
		"//evil.example/x":                     "//evil.example/x", // another host: left alone
		"https://elsewhere.test/":              "https://elsewhere.test/",
		"http://localhost:9000/x":              "http://localhost:9000/x",
		"relative/path":                        prefix + "/app/relative/path",
		"http://127.0.0.1:8000/ok":             prefix + "/ok",
		"/../../../../../v1/sandboxes":         prefix + "/v1/sandboxes",
		"../../../../../v1/sandboxes?a=1":      prefix + "/v1/sandboxes?a=1",
		"/%2e%2e/%2e%2e/%2e%2e/v1/sandboxes":   prefix + "/v1/sandboxes",
		"http://localhost:8000/../../v1/keys":  prefix + "/v1/keys",
		"http://api.test:7791/v1/sandboxes/b":  prefix + "/v1/sandboxes/b",
		"http://API.test:7791/../v1/keys#frag": prefix + "/v1/keys#frag",
	} {
		h := http.Header{"Location": {loc}}
		underPrefix(h, prefix, "8000", "/app/page", "api.test:7791")
		if got := h.Get("Location"); got != want {
			t.Errorf("Location %q became %q, want %q", loc, got, want)
		}
	}

	r := http.Header{"Cookie": {"app=1; wr_session=S; __Host-wr_session=T", "wr_login=L; other=2"}}
	dropRuntimeCookies(r)
	if got := r.Values("Cookie"); !slices.Equal(got, []string{"app=1; other=2"}) {
		t.Errorf("cookies into the sandbox: %q", got)
	}
	for v, want := range map[string]bool{"Bearer wr_abc": true, "bearer  wr_abc": true, "wr_abc": true, "Basic dXNlcjo=": false, "Bearer eyJ": false} {
		if got := runtimeKeyIn(v); got != want {
			t.Errorf("runtimeKeyIn(%q) = %v", v, got)
		}
	}

	d := http.Header{}
	d.Add("Set-Cookie", "s=1; Domain=d.test; Path=/; Secure")
	d.Add("Set-Cookie", "t=2; Path=/x")
	hostOnlyCookies(d)
	if got, want := d.Values("Set-Cookie"), []string{"s=1; Path=/; Secure", "t=2; Path=/x"}; !slices.Equal(got, want) {
		t.Errorf("domain-mode cookies:\n got %q\nwant %q", got, want)
	}
}
