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
	underPrefix(h, prefix, "8000", "/", "api.test:7791", "http")
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
	// routes with the caller's key; one to another port of the API's host
	// name, a subdomain of it or another loopback port is dropped (""), since
	// clients keep Authorization there (issue 25, N8b); another site's is
	// left alone.
	for loc, want := range map[string]string{
		"/x":                                   prefix + "/x",
		"/dir/":                                prefix + "/dir/",
		"//evil.example/x":                     "//evil.example/x", // another host: left alone
		"https://elsewhere.test/":              "https://elsewhere.test/",
		"http://api.test.evil.example/":        "http://api.test.evil.example/",
		"mailto:a@example.com":                 "mailto:a@example.com",
		"myapp://callback?code=1":              "myapp://callback?code=1",
		"relative/path":                        prefix + "/app/relative/path",
		"http://127.0.0.1:8000/ok":             prefix + "/ok",
		"http://[::1]:8000/v6":                 prefix + "/v6",
		"http://0.0.0.0:8000/z":                prefix + "/z",
		"http://LOCALHOST.:8000/up":            prefix + "/up",
		"/../../../../../v1/sandboxes":         prefix + "/v1/sandboxes",
		"../../../../../v1/sandboxes?a=1":      prefix + "/v1/sandboxes?a=1",
		"/%2e%2e/%2e%2e/%2e%2e/v1/sandboxes":   prefix + "/v1/sandboxes",
		"http://localhost:8000/../../v1/keys":  prefix + "/v1/keys",
		"http://api.test:7791/v1/sandboxes/b":  prefix + "/v1/sandboxes/b",
		"http://API.test:7791/../v1/keys#frag": prefix + "/v1/keys#frag",
		"http://api.test:9999/":                "",
		"http://api.test/":                     "",
		"https://api.test:7791/":               prefix + "/", // the API's own host and port
		"https://api.test/v1/keys":             "",
		"http://api.test.:9999/":               "",
		"http://user:pw@api.test:9999/":        "",
		"//api.test:1/x":                       "",
		"http://x.api.test:7791/":              "",
		"http://ａｐｉ.test:9999/":                "", // fullwidth: IDNA maps it to api.test, as Go's client does
		"http://localhost:9000/x":              "",
		"http://127.0.0.2:22/":                 "",
		"http://[::1]:9000/":                   "",
		"http://%zz/":                          "",
	} {
		h := http.Header{"Location": {loc}}
		underPrefix(h, prefix, "8000", "/app/page", "api.test:7791", "http")
		if got := h.Get("Location"); got != want {
			t.Errorf("Location %q became %q, want %q", loc, got, want)
		}
	}
	// The E2B domain mode: the port is the root of its own host.
	for loc, want := range map[string]string{
		"/x":                                 "/x",
		"http://localhost:8000/a/../b?q=1":   "/b?q=1",
		"https://8000-abc.d.test/p":          "/p",
		"https://8000-ABC.d.test:443/p":      "/p",
		"https://api.d.test/":                "https://api.d.test/", // a sibling: the client's cross-site rules apply
		"https://9000-other.d.test/":         "https://9000-other.d.test/",
		"http://8000-abc.d.test/p":           "",
		"https://8000-abc.d.test:7780/":      "",
		"https://x.8000-abc.d.test/":         "",
		"http://localhost:7780/v1/sandboxes": "",
	} {
		h := http.Header{"Location": {loc}}
		relayLocation(h, "", "8000", "/", "8000-abc.d.test", "https")
		if got := h.Get("Location"); got != want {
			t.Errorf("domain mode: Location %q became %q, want %q", loc, got, want)
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
