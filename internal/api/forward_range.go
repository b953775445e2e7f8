package api

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// The download headers of the agent's answers (GET .../files, with Range),
// which come from inside the sandbox: each is passed on only in the form
// the agent protocol gives it.

// badAnswerError is an agent answer that breaks the agent protocol in a way
// that could mislead the caller; the server answers 502 bad_answer instead.
type badAnswerError struct{ msg string }

func (e *badAnswerError) Error() string { return e.msg }

// etagPattern is an entity tag (RFC 9110 8.8.3), at most 200 bytes.
var etagPattern = regexp.MustCompile(`^(W/)?"[\x21\x23-\x7e]{0,196}"$`)

// keepDownloadHeaders copies into kept the agent's Accept-Ranges, ETag and
// Last-Modified when each is well formed.
func keepDownloadHeaders(in, kept http.Header) {
	if v := in.Get("Accept-Ranges"); v == "bytes" || v == "none" {
		kept.Set("Accept-Ranges", v)
	}
	if v := in.Get("ETag"); etagPattern.MatchString(v) {
		kept.Set("ETag", v)
	}
	if t, err := http.ParseTime(in.Get("Last-Modified")); err == nil {
		kept.Set("Last-Modified", t.UTC().Format(http.TimeFormat))
	}
}

// checkContentRange passes on the agent's Content-Range where the protocol
// has one: a 206 must carry "bytes FIRST-LAST/SIZE" that its Content-Length
// matches (else *badAnswerError), a 416 may carry "bytes */SIZE". Any other
// answer has none.
func checkContentRange(resp *http.Response, in http.Header) error {
	cr := in.Get("Content-Range")
	switch resp.StatusCode {
	case http.StatusPartialContent:
		first, last, size, ok := parseContentRange(cr)
		if !ok || first > last || last >= size {
			return &badAnswerError{fmt.Sprintf("a partial answer (206) with Content-Range %.100q", cr)}
		}
		if resp.ContentLength != last-first+1 {
			return &badAnswerError{fmt.Sprintf("a partial answer (206) of bytes %d-%d with Content-Length %d", first, last, resp.ContentLength)}
		}
		resp.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, size))
	case http.StatusRequestedRangeNotSatisfiable:
		if rest, ok := strings.CutPrefix(cr, "bytes */"); ok {
			if size, ok := digits(rest); ok {
				resp.Header.Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
			}
		}
	}
	return nil
}

// parseContentRange reads "bytes FIRST-LAST/SIZE".
func parseContentRange(v string) (first, last, size int64, ok bool) {
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return 0, 0, 0, false
	}
	rng, sz, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, 0, false
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, 0, false
	}
	var ok1, ok2, ok3 bool
	first, ok1 = digits(a)
	last, ok2 = digits(b)
	size, ok3 = digits(sz)
	return first, last, size, ok1 && ok2 && ok3
}

// digits parses a non-empty run of decimal digits that fits an int64.
func digits(s string) (int64, bool) {
	if s == "" || len(s) > 19 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
