package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/api"
	"withruntime.dev/runtime/internal/store"
)

// The facade never reaches the manager or a sandbox's agent by a way of its
// own: every operation is a request to Runtime's API handler, in process,
// authenticated as a key (the X-API-KEY of a control-plane request, or the
// owner of the sandbox an access token opens). So the API's strict decoding,
// ranges, tenant rules, spending limits, paused/autoResume handling, upload
// cap, agent channel checks and the sanitizing of agent answers all apply to
// E2B clients exactly as to Runtime's own.

// maxJSONAnswer caps a JSON answer read into memory (a process or file list
// comes from inside a sandbox, which may be hostile).
const maxJSONAnswer = 8 << 20

// apiClient calls the API handler in process.
type apiClient struct{ h http.Handler }

// who authenticates one in-process request: a bearer token (the client's
// X-API-KEY) or a stored key (the owner of a sandbox, for data-plane calls
// that carry only the sandbox's access token).
type who struct {
	token string
	key   *store.Key
	// keyID is the id of token's key (control-plane requests), for the
	// facade's own records kept per key (E2B templates).
	keyID string
}

// apiError is an error answer of the API: its status, code and message,
// and its headers (a 416's Content-Range).
type apiError struct {
	Status  int
	Code    string
	Message string
	Header  http.Header
}

func (e *apiError) Error() string { return e.Message }

// do sends one request and returns the answer with its body streaming: the
// handler runs in a goroutine writing into a pipe, so NDJSON streams and
// file downloads flow with back pressure. The caller closes the body;
// closing it early cancels the request. An answer of 400 or more is turned
// into an *apiError (its body read and closed).
func (c apiClient) do(ctx context.Context, as who, method, path string, body io.Reader, header http.Header) (*http.Response, error) {
	return c.doLen(ctx, as, method, path, body, -1, header)
}

// doLen is do with the body's length when known (-1: unknown, unless
// body is a bytes.Reader or the like whose length http.NewRequest reads).
// The length must not be left 0 for a body that has bytes: the API's
// reverse proxy drops a body of length 0.
func (c apiClient) doLen(ctx context.Context, as who, method, path string, body io.Reader, length int64, header http.Header) (*http.Response, error) {
	ctx, cancel := context.WithCancel(ctx)
	if as.key != nil {
		ctx = api.AsKey(ctx, *as.key)
	}
	if body == nil {
		body = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://runtime.invalid"+path, body)
	if err != nil {
		cancel()
		return nil, err
	}
	switch {
	case length >= 0:
		req.ContentLength = length
	case req.ContentLength == 0 && req.Body != http.NoBody:
		req.ContentLength = -1
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if as.key == nil {
		req.Header.Set("Authorization", "Bearer "+as.token)
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				w.begin(http.StatusInternalServerError)
				if p == http.ErrAbortHandler {
					// How net/http handlers (the API's reverse proxy
					// to an agent) abort an answer already begun: the
					// sandbox's agent went away mid-answer.
					pw.CloseWithError(errAnswerCut)
					return
				}
				pw.CloseWithError(fmt.Errorf("API handler panicked: %v", p))
				return
			}
			w.begin(http.StatusOK)
			pw.Close()
		}()
		c.h.ServeHTTP(w, req)
	}()
	<-w.ready
	resp := &http.Response{StatusCode: w.code, Header: w.sent, Body: &cancelBody{ReadCloser: pr, cancel: cancel},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req, ContentLength: -1}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	return resp, nil
}

// json sends a JSON request (in may be nil) and decodes a JSON answer into
// out (may be nil).
func (c apiClient) json(ctx context.Context, as who, method, path string, in, out any) error {
	var body io.Reader
	h := http.Header{"Accept": {"application/json"}}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
		h.Set("Content-Type", "application/json")
	}
	resp, err := c.do(ctx, as, method, path, body, h)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxJSONAnswer))
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONAnswer+1))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if len(data) > maxJSONAnswer {
		return &apiError{Status: http.StatusBadGateway, Code: "too_large",
			Message: fmt.Sprintf("the answer to %s %s is over %d bytes", method, path, maxJSONAnswer)}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &apiError{Status: http.StatusBadGateway, Code: "bad_answer",
			Message: fmt.Sprintf("the answer to %s %s is not what the API sends: %v", method, path, err)}
	}
	return nil
}

func readAPIError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb agentapi.ErrorBody
	if json.Unmarshal(data, &eb) != nil || eb.Error.Message == "" {
		eb.Error = agentapi.Error{Code: "http_error", Message: fmt.Sprintf("the request failed with status %d", resp.StatusCode)}
	}
	return &apiError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message, Header: resp.Header}
}

// asAPIError returns err's *apiError, or a 500 one for any other error.
func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return &apiError{Status: http.StatusInternalServerError, Code: agentapi.CodeInternal, Message: err.Error()}
}

// cancelBody cancels the in-process request when its answer is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// pipeWriter is the http.ResponseWriter of an in-process request: the
// status and headers are handed over at the first write (or flush, or the
// handler's end), the body goes through a pipe.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	code   int
	sent   http.Header
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) begin(code int) {
	w.once.Do(func() {
		w.code, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		return
	}
	w.begin(code)
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.begin(http.StatusOK)
	return w.pw.Write(p)
}

// Flush hands the headers over; the pipe itself holds nothing back.
func (w *pipeWriter) Flush() { w.begin(http.StatusOK) }
