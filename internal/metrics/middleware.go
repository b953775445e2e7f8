package metrics

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// RequestIDHeader carries a request's id: a caller's own (echoed back) or
// one the server makes.
const RequestIDHeader = "X-Request-Id"

// maxRequestID is the longest caller id that is kept.
const maxRequestID = 128

type requestIDKey struct{}

// RequestID returns the id of the request ctx belongs to ("" outside one).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// MaxLogField is the most bytes of one field taken from a request (its
// method, path, a header) that a log line holds: whatever a client sends,
// a request's log line stays about a kilobyte (LogField).
const MaxLogField = 256

// LogField returns s, a value taken from a request, for a log line: cut
// to MaxLogField bytes (on a UTF-8 boundary) with the number of bytes left
// out said, so a client cannot make one request cost the log what it
// sends.
func LogField(s string) string {
	if len(s) <= MaxLogField {
		return s
	}
	cut := MaxLogField
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "...(" + strconv.Itoa(len(s)-cut) + " more bytes)"
}

// MethodLabel is the metrics label of a request's method: the method
// itself when it is one of RFC 9110's and RFC 5789's (GET, HEAD, POST,
// PUT, PATCH, DELETE, CONNECT, OPTIONS, TRACE), else "other". A method is
// any token a client cares to send (net/http accepts them all), so a label
// per method would let one anonymous client grow the registry, and every
// scrape, without bound: 400 requests with 1 MB methods took a server from
// 58 to 553 MiB and /metrics to 4.75 GB.
func MethodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return "other"
}

// Middleware wraps next so that every request gets an id (the caller's
// X-Request-Id when it is 1 to 128 letters, digits or ._:-; otherwise a new
// random one), echoed in the answer's X-Request-Id and put in the request's
// context (RequestID); is counted and timed by method (MethodLabel), route
// pattern and status; and is logged once, at Info, when it ends, each
// field from the request cut to MaxLogField bytes. The route is the
// pattern next's ServeMux matched, one of a fixed set, or "unmatched";
// never the raw path. Labels are so bounded by the server's code, not by
// what clients send.
func (m *Metrics) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
		rw := &recorder{ResponseWriter: w}
		next.ServeHTTP(rw, r)
		d := time.Since(start)
		route := r.Pattern
		if i := strings.IndexByte(route, ' '); i >= 0 {
			route = route[i+1:] // "POST /v1/sandboxes" -> "/v1/sandboxes"; the method is its own label
		}
		if route == "" {
			route = "unmatched"
		}
		code := rw.status()
		m.observeRequest(MethodLabel(r.Method), route, code, d)
		m.log.Info("request", "id", id, "method", LogField(r.Method), "path", LogField(r.URL.Path), "route", route,
			"status", code, "bytes", rw.bytes, "duration", d.Round(time.Microsecond), "remote", r.RemoteAddr)
	})
}

func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// forwardedRoute reports whether route is one the API forwards to a
// sandbox's agent.
func forwardedRoute(route string) bool {
	rest, ok := strings.CutPrefix(route, "/v1/sandboxes/{id}/")
	if !ok {
		return false
	}
	return rest == "exec" || strings.HasPrefix(rest, "processes") || strings.HasPrefix(rest, "files")
}

func codeLabel(code int) string { return strconv.Itoa(code) }

// recorder notes the status and the bytes written. It keeps Flush and
// Unwrap so streams (NDJSON exec output) and http.ResponseController work
// through it.
type recorder struct {
	http.ResponseWriter
	code  int
	bytes int64
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 && code >= 200 { // 1xx answers come before the real one
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Flush() {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}
