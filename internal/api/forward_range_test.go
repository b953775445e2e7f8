package api

import (
	"errors"
	"net/http"
	"testing"
)

// An agent's download headers pass only in the protocol's form; a partial
// answer whose Content-Range and Content-Length disagree is refused.
func TestSanitizeDownloadHeaders(t *testing.T) {
	answer := func(status int, length int64, kv ...string) *http.Response {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return &http.Response{StatusCode: status, ContentLength: length, Header: h}
	}
	resp := answer(200, 10, "Accept-Ranges", "bytes", "ETag", `"1-a-b"`, "Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT",
		"Content-Range", "bytes 0-9/10", "Set-Cookie", "a=b")
	if err := sanitizeAgentResponse(resp); err != nil {
		t.Fatal(err)
	}
	h := resp.Header
	if h.Get("Accept-Ranges") != "bytes" || h.Get("ETag") != `"1-a-b"` || h.Get("Last-Modified") != "Mon, 02 Jan 2006 15:04:05 GMT" ||
		h.Get("Content-Range") != "" || h.Get("Set-Cookie") != "" {
		t.Errorf("200: %v", h)
	}
	resp = answer(200, 10, "Accept-Ranges", "bytes, evil", "ETag", `"a" <script>`, "Last-Modified", "yesterday")
	_ = sanitizeAgentResponse(resp)
	if h := resp.Header; h.Get("Accept-Ranges") != "" || h.Get("ETag") != "" || h.Get("Last-Modified") != "" {
		t.Errorf("malformed headers passed: %v", h)
	}
	resp = answer(206, 10, "Content-Range", "bytes 5-14/100")
	if err := sanitizeAgentResponse(resp); err != nil || resp.Header.Get("Content-Range") != "bytes 5-14/100" {
		t.Errorf("206: %v %v", err, resp.Header)
	}
	for _, c := range []struct {
		length int64
		cr     string
	}{
		{10, ""}, {10, "bytes 5-15/100"}, {10, "bytes 5-14/14"}, {10, "bytes 14-5/100"}, {-1, "bytes 5-14/100"},
		{10, "bytes 5-14/*"}, {10, "items 5-14/100"}, {10, "bytes 5-14/100\r\nX: y"}, {10, "bytes -5-14/100"},
	} {
		var bad *badAnswerError
		if err := sanitizeAgentResponse(answer(206, c.length, "Content-Range", c.cr)); !errors.As(err, &bad) {
			t.Errorf("206 of length %d with Content-Range %q: %v", c.length, c.cr, err)
		}
	}
	resp = answer(416, 50, "Content-Range", "bytes */100")
	if err := sanitizeAgentResponse(resp); err != nil || resp.Header.Get("Content-Range") != "bytes */100" {
		t.Errorf("416: %v %v", err, resp.Header)
	}
	resp = answer(416, 50, "Content-Range", "bytes 0-1/100")
	if err := sanitizeAgentResponse(resp); err != nil || resp.Header.Get("Content-Range") != "" {
		t.Errorf("416 with a range: %v %v", err, resp.Header)
	}
}
