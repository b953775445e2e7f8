package itest

// Signed file URLs (POST /v1/sandboxes/{id}/files/url, /v1/files/signed):
// usable with no API key for their one sandbox, path and operation, until
// they expire or the sandbox stops; anything changed in them is refused.

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/api"
)

// anon sends a request with no API key.
func anon(t *testing.T, method, rawURL string, body []byte, hdr ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func TestSignedFileURLs(t *testing.T) {
	e := newEnv(t)
	sb := e.create(api.CreateSandboxRequest{})
	base := "/v1/sandboxes/" + sb.ID
	e.must(http.StatusOK, "PUT", base+"/files?path=/workspace/secret.txt", "the secret", nil)
	e.must(http.StatusOK, "PUT", base+"/files?path=/workspace/other.txt", "not yours", nil)
	sign := func(path, op string, secs int64) api.FileURL {
		var u api.FileURL
		e.must(http.StatusOK, "POST", base+"/files/url", api.FileURLRequest{Path: path, Operation: op, ExpiresInSeconds: secs}, &u)
		return u
	}
	read := sign("/workspace/secret.txt", "read", 0)
	if read.Method != "GET" || !strings.HasPrefix(read.URL, e.http.URL+"/v1/files/signed?") || time.Until(read.ExpiresAt) < 59*time.Minute {
		t.Fatalf("%+v", read)
	}
	if st, body := anon(t, "GET", read.URL, nil); st != 200 || string(body) != "the secret" {
		t.Fatalf("the read URL: %d %q", st, body)
	}
	if st, body := anon(t, "GET", read.URL, nil, "Range", "bytes=4-9"); st != 206 || string(body) != "secret" {
		t.Fatalf("a range through the read URL: %d %q", st, body)
	}
	write := sign("new/up.txt", "write", 60)
	if st, body := anon(t, "PUT", write.URL, []byte("uploaded")); st != 200 || !strings.Contains(string(body), "/workspace/new/up.txt") {
		t.Fatalf("the write URL: %d %s", st, body)
	}
	if _, got := e.do("GET", base+"/files?path=/workspace/new/up.txt", nil); string(got) != "uploaded" {
		t.Fatalf("uploaded file holds %q", got)
	}

	// Hostile: each change to a URL is refused, and nothing happens.
	edit := func(raw string, f func(q url.Values)) string {
		u, _ := url.Parse(raw)
		q := u.Query()
		f(q)
		u.RawQuery = q.Encode()
		return u.String()
	}
	tampered := edit(read.URL, func(q url.Values) {
		s := []byte(q.Get("sig"))
		s[3] ^= 1
		q.Set("sig", string(s))
	})
	pathSwap := edit(read.URL, func(q url.Values) { q.Set("path", "/workspace/other.txt") })
	opSwap := edit(write.URL, func(q url.Values) { q.Set("op", "read") })
	later := edit(read.URL, func(q url.Values) { q.Set("expires", "99999999999") })
	twice := read.URL + "&path=/workspace/other.txt"
	other := e.create(api.CreateSandboxRequest{})
	sbSwap := edit(read.URL, func(q url.Values) { q.Set("sandbox", other.ID) })
	for _, c := range []struct {
		name, method, url string
		want              int
	}{
		{"a tampered signature", "GET", tampered, 401},
		{"a path swap", "GET", pathSwap, 401},
		{"a path given twice", "GET", twice, 401},
		{"a write URL made a read URL", "GET", opSwap, 401},
		{"a later expiry", "GET", later, 401},
		{"another sandbox", "GET", sbSwap, 401},
		{"a read URL used to write", "PUT", read.URL, 403},
		{"a write URL used to read", "GET", write.URL, 403},
		{"no signature", "GET", e.http.URL + "/v1/files/signed?sandbox=" + sb.ID + "&path=/workspace/secret.txt", 401},
	} {
		if st, body := anon(t, c.method, c.url, []byte("overwritten")); st != c.want || strings.Contains(string(body), "secret") || strings.Contains(string(body), "not yours") {
			t.Errorf("%s: %d %s, want %d", c.name, st, body, c.want)
		}
	}
	if _, got := e.do("GET", base+"/files?path=/workspace/secret.txt", nil); string(got) != "the secret" {
		t.Fatalf("a refused URL changed the file: %q", got)
	}

	// Expired.
	short := sign("/workspace/secret.txt", "read", 1)
	time.Sleep(2100 * time.Millisecond)
	if st, body := anon(t, "GET", short.URL, nil); st != 403 || !strings.Contains(string(body), "expired") {
		t.Errorf("an expired URL: %d %s", st, body)
	}

	// Bad requests to sign.
	for _, body := range []any{
		api.FileURLRequest{Path: "/workspace/a", Operation: "delete"},
		api.FileURLRequest{Operation: "read"},
		api.FileURLRequest{Path: "/workspace/a", Operation: "read", ExpiresInSeconds: 8 * 24 * 3600},
	} {
		if st, got := e.do("POST", base+"/files/url", body); st != 400 {
			t.Errorf("%+v: %d %s", body, st, got)
		}
	}

	// The sandbox is killed: its URLs stop with it.
	e.must(http.StatusNoContent, "DELETE", base, nil, nil)
	if st, body := anon(t, "GET", read.URL, nil); st != 410 {
		t.Errorf("a URL after the sandbox was killed: %d %s", st, body)
	}
	if st, _ := anon(t, "PUT", write.URL, []byte("late")); st != 410 {
		t.Errorf("a write URL after the sandbox was killed: %d", st)
	}
}
