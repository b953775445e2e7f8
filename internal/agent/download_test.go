package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// Downloads honour one byte range: 206 with Content-Range, 416 with
// bytes */SIZE past the end, and the whole file (200) for a Range that is
// malformed, of another unit, of several ranges, or under an If-Range of
// another version.
func TestGetFileRange(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	a.call("PUT", "/files?path=r.bin", data, 200, nil)
	get := func(hdr ...string) (*http.Response, []byte) {
		t.Helper()
		resp := a.do(t.Context(), "GET", "/files?path=r.bin", nil, hdr...)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	resp, body := get()
	etag, lastMod := resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	if resp.StatusCode != 200 || string(body) != string(data) || resp.Header.Get("Accept-Ranges") != "bytes" ||
		etag == "" || lastMod == "" || resp.Header.Get("Content-Range") != "" {
		t.Fatalf("plain download: %d, %d bytes, headers %v", resp.StatusCode, len(body), resp.Header)
	}
	for _, c := range []struct {
		rng         string
		first, last int
	}{
		{"bytes=0-99", 0, 99},
		{"bytes=100-", 100, 999},
		{"bytes=-10", 990, 999},
		{"bytes=-5000", 0, 999},
		{"bytes=990-5000", 990, 999},
		{"bytes=999-999", 999, 999},
		{"BYTES = 5-6", 5, 6},
		{"bytes=0-99999999999999999999999", 0, 999},
	} {
		resp, body := get("Range", c.rng)
		want := fmt.Sprintf("bytes %d-%d/1000", c.first, c.last)
		if resp.StatusCode != 206 || resp.Header.Get("Content-Range") != want || string(body) != string(data[c.first:c.last+1]) ||
			resp.ContentLength != int64(c.last-c.first+1) || resp.Header.Get("Accept-Ranges") != "bytes" {
			t.Errorf("Range %q: %d, Content-Range %q (want %q), %d bytes", c.rng, resp.StatusCode, resp.Header.Get("Content-Range"), want, len(body))
		}
	}
	for _, rng := range []string{"bytes=1000-", "bytes=1000-2000", "bytes=-0", "bytes=99999999999999999999999-"} {
		resp, body := get("Range", rng)
		var eb agentapi.ErrorBody
		if resp.StatusCode != 416 || resp.Header.Get("Content-Range") != "bytes */1000" ||
			json.Unmarshal(body, &eb) != nil || eb.Error.Code != agentapi.CodeRangeNotSatisfiable {
			t.Errorf("Range %q: %d, Content-Range %q, %s", rng, resp.StatusCode, resp.Header.Get("Content-Range"), body)
		}
	}
	for _, rng := range []string{"bytes=5-1", "bytes=a-b", "bytes=", "bytes=-", "items=0-9", "bytes 0-9", "bytes=0-1,5-6", "bytes=1 -2", "bytes=+1-2"} {
		if resp, body := get("Range", rng); resp.StatusCode != 200 || len(body) != 1000 || resp.Header.Get("Content-Range") != "" {
			t.Errorf("Range %q (ignored): %d, %d bytes, Content-Range %q", rng, resp.StatusCode, len(body), resp.Header.Get("Content-Range"))
		}
	}
	// If-Range: the range applies to the same version only.
	for ifRange, partial := range map[string]bool{
		etag:                            true,
		lastMod:                         true,
		`"other"`:                       false,
		"W/" + etag:                     false,
		"Mon, 02 Jan 2006 15:04:05 GMT": false,
		"not a date":                    false,
	} {
		if resp, _ := get("Range", "bytes=0-9", "If-Range", ifRange); (resp.StatusCode == 206) != partial {
			t.Errorf("If-Range %q: %d", ifRange, resp.StatusCode)
		}
	}
	// A new version has another ETag.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(a.workspace, "r.bin"), later, later); err != nil {
		t.Fatal(err)
	}
	if resp, _ := get("Range", "bytes=0-9", "If-Range", etag); resp.StatusCode != 200 || resp.Header.Get("ETag") == etag {
		t.Errorf("If-Range of an older version: %d, ETag %q", resp.StatusCode, resp.Header.Get("ETag"))
	}
	// A file that reports size 0 is sent whole, whatever the Range.
	a.call("PUT", "/files?path=empty", []byte{}, 200, nil)
	resp = a.do(t.Context(), "GET", "/files?path=empty", nil, "Range", "bytes=0-")
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Accept-Ranges") != "bytes" {
		t.Errorf("empty file with a Range: %d %v", resp.StatusCode, resp.Header)
	}
	resp = a.do(t.Context(), "GET", "/files?path=/proc/self/status", nil, "Range", "bytes=0-3")
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(body) < 10 {
		t.Errorf("/proc/self/status with a Range: %d, %d bytes", resp.StatusCode, len(body))
	}
}
