package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/driver"
	"withruntime.dev/runtime/internal/errs"
	"withruntime.dev/runtime/internal/httpwait"
	"withruntime.dev/runtime/internal/metrics"
)

// agentRoutes are the sandbox-scoped routes served by the agent (see
// internal/agentapi), relative to /v1/sandboxes/{id}/. The server registers
// each with its method, so an unknown path is a 404 and a wrong method a
// 405 before the sandbox is looked up, and checks each request (query,
// process id, JSON body) before forwarding it.
var agentRoutes = []agentRoute{
	{method: "POST", path: "exec", body: execBody, maxBody: maxExecBytes},
	{method: "POST", path: "processes", body: func() any { return &processRequest{} }, maxBody: maxExecBytes},
	{method: "GET", path: "processes"},
	{method: "GET", path: "processes/{pid}"},
	{method: "POST", path: "processes/{pid}/wait",
		query: map[string]queryRule{"timeoutSeconds": numberParam(0, maxExecTimeoutSeconds, "seconds")}},
	{method: "POST", path: "processes/{pid}/kill", body: func() any { return &killRequest{} }},
	{method: "POST", path: "processes/{pid}/stdin", maxRaw: agentapi.MaxStdinWriteBytes},
	{method: "POST", path: "processes/{pid}/stdin/close"},
	{method: "POST", path: "processes/{pid}/resize", body: func() any { return &resizeRequest{} }},
	{method: "GET", path: "files", query: map[string]queryRule{"path": pathParam}},
	{method: "PUT", path: "files", query: map[string]queryRule{"path": pathParam, "metadata": metadataParam}},
	{method: "DELETE", path: "files", query: map[string]queryRule{"path": pathParam, "recursive": boolParam}},
	{method: "GET", path: "files/list", query: map[string]queryRule{"path": pathParam, "depth": intParam(1, agentapi.ListMaxDepth, "levels"),
		"limit": intParam(1, agentapi.ListMaxLimit, "entries per page"), "cursor": cursorParam}},
	{method: "GET", path: "files/stat", query: map[string]queryRule{"path": pathParam}},
	{method: "POST", path: "files/mkdir", body: func() any { return &mkdirRequest{} }},
	{method: "POST", path: "files/rename", body: func() any { return &renameRequest{} }},
	{method: "GET", path: "files/watch", query: map[string]queryRule{"path": pathParam, "recursive": boolParam}},
	{method: "POST", path: "code", body: func() any { return &runCodeRequest{} }, maxBody: maxExecBytes},
	{method: "POST", path: "contexts", body: func() any { return &createContextRequest{} }},
	{method: "GET", path: "contexts"},
	{method: "GET", path: "contexts/{contextId}"},
	{method: "DELETE", path: "contexts/{contextId}"},
	{method: "POST", path: "contexts/{contextId}/restart"},
	{method: "PATCH", path: "contexts/{contextId}", body: func() any { return &updateContextRequest{} }},
}

// maxExecBytes caps an exec's JSON body, which carries its stdin (64 MiB,
// as the agent does).
const maxExecBytes = 64 << 20

// agentRoute is one route the agent serves, with what the server checks.
type agentRoute struct {
	method, path string
	// query lists the parameters the route takes, each with its rule.
	query map[string]queryRule
	// body returns a new request to decode a JSON body into (nil: the
	// route takes no JSON body); maxBody caps it (0: maxJSONBytes).
	body    func() any
	maxBody int64
	// maxRaw caps a raw (not JSON) request body forwarded as it comes (0:
	// none beyond the upload cap of PUT).
	maxRaw int64
}

func execBody() any { return &execRequest{} }

// forwarder returns the handler that checks and forwards one agent route,
// with {pid} and {contextId} filled from the request.
func (s *Server) forwarder(ar agentRoute) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		req, err := ar.check(r)
		if err != nil {
			return err
		}
		r = r.WithContext(httpwait.WithBounds(r.Context(), agentBounds(ar, r, req)))
		if hb, ok := r.Body.(*heldBody); ok {
			defer hb.Close() // gives its bytes back, also when nothing was forwarded
		}
		if ar.maxRaw > 0 {
			if r.ContentLength > ar.maxRaw {
				return errs.New(errs.TooLarge, "the body of %d bytes is over the %d-byte cap of %s %s; send it in parts", r.ContentLength, ar.maxRaw, ar.method, ar.path)
			}
			r.Body = http.MaxBytesReader(w, r.Body, ar.maxRaw)
		}
		rest := ar.path
		for _, name := range []string{"pid", "contextId"} {
			if strings.Contains(rest, "{"+name+"}") {
				rest = strings.Replace(rest, "{"+name+"}", url.PathEscape(r.PathValue(name)), 1)
			}
		}
		return s.forward(w, r, rest)
	}
}

// check refuses what the agent would refuse and the server can tell
// without it: an unknown, repeated or out-of-range query parameter, a
// process id that is not one, a JSON body that is not strictly the route's
// (see decodeJSON). A checked JSON body is forwarded as it came; req is
// what it decoded to (ar.body's type; nil for a route without a body), for
// the server's own use of its fields, so that no body is decoded twice (a
// 60 MB exec stdin took ~0.3 s of the server's CPU to scan again).
func (ar agentRoute) check(r *http.Request) (req any, err error) {
	if err := checkQuery(r.URL.RawQuery, ar.query); err != nil {
		return nil, err
	}
	if strings.Contains(ar.path, "{pid}") {
		if err := intParam(1, maxPid, "(a process id)")("pid", r.PathValue("pid")); err != nil {
			return nil, err
		}
	}
	if strings.Contains(ar.path, "{contextId}") {
		if err := checkName("context id", r.PathValue("contextId")); err != nil {
			return nil, err
		}
	}
	if ar.body == nil {
		return nil, nil
	}
	limit := ar.maxBody
	if limit == 0 {
		limit = maxJSONBytes
	}
	data, release, err := readBody(r, limit)
	if err != nil {
		return nil, err
	}
	req = ar.body()
	var bounds []bound
	if b, ok := req.(interface{ bounds() []bound }); ok {
		bounds = b.bounds()
	}
	if err := decodeJSON(data, req, bounds...); err != nil {
		release()
		return nil, err
	}
	// The bytes stay booked until the agent has read them (or the
	// request ends: the forwarder closes the body).
	r.Body, r.ContentLength, r.TransferEncoding = &heldBody{data: data, release: release}, int64(len(data)), nil
	return req, nil
}

// forward sends a sandbox-scoped request (exec, processes, files) to the
// sandbox's agent, streaming both ways. The server checks the key, the
// sandbox's state and the upload cap; the agent does the rest. rest is the
// agent's path without the leading slash, escaped.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, rest string) error {
	id := r.PathValue("id")
	if r.Method == http.MethodPut && r.ContentLength > s.cfg.MaxUploadBytes {
		// Refused before the body is read: a client that sent
		// Expect: 100-continue never sends it.
		return errs.New(errs.TooLarge, "upload of %d bytes is over the %d-byte cap per file; split it or raise --max-upload-bytes", r.ContentLength, s.cfg.MaxUploadBytes)
	}
	tr, err := s.cfg.Manager.AgentTransport(r.Context(), id)
	if err != nil {
		return err
	}
	tr = s.boundAgent(tr, id) // see agentwait.go
	// A request body that fails to read (over the cap, malformed chunking,
	// a client gone) ends the round trip at once: the agent drops the
	// partial upload, and the failure is the client's, not the sandbox's.
	in := r.Context()
	ctx, cancel := context.WithCancelCause(in)
	defer cancel(nil)
	body := &bodyReader{cancel: cancel, done: true}
	if r.Body != nil && r.Body != http.NoBody {
		body.done = false
		body.rc = r.Body
		if r.Method == http.MethodPut {
			body.rc = http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes)
		}
		r.Body = body
	}
	r = r.WithContext(ctx)
	path, err := url.PathUnescape(rest)
	if err != nil {
		return badRequest("malformed path %q: %v", rest, err)
	}
	// The agent may answer (an NDJSON stream) before it has read the whole
	// request; full duplex keeps the request body readable meanwhile.
	_ = http.NewResponseController(w).EnableFullDuplex()
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", "agent", "agent"
			pr.Out.URL.Path, pr.Out.URL.RawPath = "/"+path, "/"+rest
			// Only what the agent protocol uses goes into the sandbox: not
			// the key, nor the caller's cookies, nor what a front proxy
			// added (X-Forwarded-For, identity headers).
			out := http.Header{}
			for _, name := range agentRequestHeaders {
				if v := pr.In.Header.Values(name); len(v) > 0 {
					out[name] = v
				}
			}
			pr.Out.Header = out
		},
		Transport:     no1xx{tr},
		FlushInterval: -1, // NDJSON events go out as the agent writes them
		ModifyResponse: func(resp *http.Response) error {
			if err := sanitizeAgentResponse(resp); err != nil {
				return err
			}
			body.closeIfUnread(resp.Header)
			return nil
		},
		// Copy errors mean the client or the sandbox went away mid-answer
		// (a lease ended, a Ctrl-C): worth a note, not a warning.
		ErrorLog: slog.NewLogLogger(s.cfg.Log.Handler(), slog.LevelInfo),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var bad *badAnswerError
			if errors.As(err, &bad) {
				s.cfg.Log.Warn("the agent's answer breaks its protocol", "sandbox", id, "method", r.Method, "path", r.URL.Path, "err", err)
				writeError(w, r, &httpError{status: http.StatusBadGateway, code: "bad_answer",
					msg: fmt.Sprintf("sandbox %s: its agent answered what Runtime's agent never does (%v); was it replaced from inside the sandbox?", id, err)})
				return
			}
			if berr := body.failed(); berr != nil {
				err = berr
			} else if in.Err() != nil {
				return // the client is gone; nobody to answer
			}
			body.closeIfUnread(w.Header())
			ferr := s.forwardError(in, id, err)
			if isInternal(ferr) {
				s.cfg.Log.Error("forward to agent", "method", metrics.LogField(r.Method), "path", metrics.LogField(r.URL.Path), "err", err)
			}
			writeError(w, r, ferr)
		},
	}
	proxy.ServeHTTP(w, r)
	return nil
}

// bodyReader passes a request body to the agent and remembers the first
// read error, cancelling the round trip when there is one.
type bodyReader struct {
	rc     io.ReadCloser
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	err    error
	done   bool // the body was read to its end
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if errors.Is(err, http.ErrBodyReadAfterClose) {
		// The server closed the body because the response began; the
		// agent read what it needed. Not a client failure.
		return n, io.EOF
	}
	if err == io.EOF {
		b.mu.Lock()
		b.done = true
		b.mu.Unlock()
	}
	if err != nil && err != io.EOF {
		b.mu.Lock()
		if b.err == nil {
			b.err = &bodyError{err}
		}
		b.mu.Unlock()
		b.cancel(err)
	}
	return n, err
}

func (b *bodyReader) Close() error { return b.rc.Close() }

// closeIfUnread marks the response Connection: close when the agent
// answered before the client's body was read to its end (an upload onto a
// full disk, say). In full-duplex mode net/http then drops the connection
// without saying so, and a client that reused it would see its next
// request fail with EOF.
func (b *bodyReader) closeIfUnread(h http.Header) {
	b.mu.Lock()
	done := b.done
	b.mu.Unlock()
	if !done {
		h.Set("Connection", "close")
	}
}

func (b *bodyReader) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// bodyError is a failure to read the client's request body.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// forwardError explains a failed round trip to the agent: an upload over
// the cap, a broken request body, a sandbox that stopped meanwhile, or a
// sandbox that died.
func (s *Server) forwardError(ctx context.Context, id string, err error) error {
	if terr := agentTimeoutError(id, err); terr != nil {
		return terr
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errs.New(errs.TooLarge, "upload is over the %d-byte cap per file; nothing was written", mbe.Limit)
	}
	var be *bodyError
	if errors.As(err, &be) {
		return badRequest("reading the request body failed (%v); nothing was written, send it again", be.err)
	}
	if errors.Is(err, driver.ErrChannel) {
		if _, rerr := s.cfg.Manager.Running(context.WithoutCancel(ctx), id); rerr != nil {
			return rerr
		}
		return s.channelRefused(id, err)
	}
	// The agent's connection broke. When the sandbox itself died (the host
	// killed it for memory, it crashed), its watcher records why within
	// milliseconds, but the broken connection may be seen first: give the
	// record a moment to say so rather than answer a bare 500.
	deadline := time.Now().Add(agentGoneWait)
	for {
		if _, rerr := s.cfg.Manager.Running(context.WithoutCancel(ctx), id); rerr != nil {
			return rerr
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox %s: the agent did not answer: %w", id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// agentGoneWait bounds how long a failed round trip waits for the
// sandbox's record to say it ended (see forwardError).
const agentGoneWait = 2 * time.Second

// channelRefused is the answer when a sandbox's agent channel was refused:
// root inside the sandbox replaced its agent's socket. Nothing was sent
// anywhere; the owner gets an answer, the operator a warning.
func (s *Server) channelRefused(id string, err error) error {
	s.cfg.Log.Warn("agent channel refused: the agent socket was tampered with from inside the sandbox", "sandbox", id, "err", err)
	return &httpError{status: http.StatusBadGateway, code: "agent_channel_refused",
		msg: fmt.Sprintf("sandbox %s: its agent cannot be reached safely: the agent's socket was removed or replaced from inside the sandbox; delete the sandbox and create a new one", id)}
}

// agentRequestHeaders are the request headers forwarded to the agent
// (Range and If-Range for downloads).
var agentRequestHeaders = []string{"Accept", "Content-Type", "Range", "If-Range"}

// no1xx hides from the agent transport the client trace through which
// httputil.ReverseProxy relays informational answers (103 Early Hints, …)
// to the caller with every header the agent put in them, before
// sanitizeAgentResponse sees anything. Without a trace the transport reads
// and drops them. The agent never sends one.
type no1xx struct{ http.RoundTripper }

func (t no1xx) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.RoundTripper.RoundTrip(r.WithContext(noTraceContext{r.Context()}))
}

// noTraceContext is a context without an httptrace.ClientTrace.
type noTraceContext struct{ context.Context }

func (c noTraceContext) Value(key any) any {
	v := c.Context.Value(key)
	if _, ok := v.(*httptrace.ClientTrace); ok {
		return nil
	}
	return v
}

// agentContentTypes are the only content types the agent sends. An answer
// comes from inside the sandbox, where root may have replaced the agent, so
// it may say anything.
var agentContentTypes = map[string]bool{
	"application/json":         true,
	agentapi.ContentTypeNDJSON: true,
	"application/octet-stream": true,
}

// sanitizeAgentResponse keeps only the headers the agent protocol uses, so
// that a forged answer cannot set cookies, redirect, or have a browser
// render a sandbox's bytes as a page of the server's origin. A partial
// answer (206) whose Content-Range and Content-Length do not agree is
// refused (*badAnswerError): a client resuming a download would splice
// wrong bytes into its file.
func sanitizeAgentResponse(resp *http.Response) error {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if !agentContentTypes[ct] {
		ct = "application/octet-stream"
	}
	kept := http.Header{}
	kept.Set("Content-Type", ct)
	kept.Set("X-Content-Type-Options", "nosniff")
	kept.Set("Cache-Control", "no-store")
	for _, name := range []string{"Content-Length", "X-Accel-Buffering"} {
		if v := resp.Header.Get(name); v != "" {
			kept.Set(name, v)
		}
	}
	keepDownloadHeaders(resp.Header, kept)
	in := resp.Header
	resp.Header = kept
	resp.Trailer = nil
	if resp.StatusCode < 200 || (resp.StatusCode >= 300 && resp.StatusCode < 400) || resp.StatusCode > 599 {
		// The agent never redirects or answers informationally.
		resp.StatusCode = http.StatusBadGateway
		resp.Status = ""
	}
	return checkContentRange(resp, in)
}
