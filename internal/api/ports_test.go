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
	underPrefix(h, prefix, "8000")
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
	for loc, want := range map[string]string{
		"/x":                       prefix + "/x",
		"//evil.example/x":         "//evil.example/x", // another host: left alone, not under the API's host
		"https://elsewhere.test/":  "https://elsewhere.test/",
		"http://localhost:9000/x":  "http://localhost:9000/x",
		"relative/path":            "relative/path",
		"http://127.0.0.1:8000/ok": prefix + "/ok",
	} {
		h := http.Header{"Location": {loc}}
		underPrefix(h, prefix, "8000")
		if got := h.Get("Location"); got != want {
			t.Errorf("Location %q became %q, want %q", loc, got, want)
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
