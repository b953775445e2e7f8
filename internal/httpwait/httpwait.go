// Package httpwait bounds how long an HTTP client waits on its peer: for
// an answer's headers, and for each next byte of an answer's body (a
// stream). A peer that accepted the connection and then stopped (a server
// under SIGSTOP, a stalled agent) is then an error naming the peer and the
// seconds waited, not a hang.
//
// The CLI's client (internal/client) and the server's forwarder to a
// sandbox's agent (internal/api) use it; the Go SDK (sdk/go, stdlib only,
// another module) has its own copy of the same rules.
package httpwait

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"sync"
	"time"
)

// Bounds is how long one request may wait. A zero field bounds nothing.
type Bounds struct {
	// Headers bounds the wait for the answer's headers. The clock starts
	// when the request is sent, stops while a read of the request's body
	// waits for its source, starts again after each such read (an upload
	// that makes progress) and once the request is written: it measures
	// the peer's silence, not the upload's length nor a slow producer.
	Headers time.Duration
	// Idle bounds each read of the answer's body: a read that gets no
	// byte for Idle fails. Time the caller spends between reads does not
	// count. Streams that may be quiet longer must send heartbeats.
	Idle time.Duration
	// Hint ends the error's message: how to raise the bound, say.
	Hint string
}

type boundsKey struct{}

// WithBounds returns ctx carrying b for the requests a Transport sends
// with it.
func WithBounds(ctx context.Context, b Bounds) context.Context {
	return context.WithValue(ctx, boundsKey{}, b)
}

// BoundsFrom returns the bounds ctx carries, and whether it carries any.
func BoundsFrom(ctx context.Context) (Bounds, bool) {
	b, ok := ctx.Value(boundsKey{}).(Bounds)
	return b, ok
}

// Phase says what a TimeoutError waited for.
type Phase string

const (
	// PhaseHeaders: the answer's headers.
	PhaseHeaders Phase = "headers"
	// PhaseIdle: the next byte of the answer's body.
	PhaseIdle Phase = "idle"
)

// TimeoutError is a wait that ran out: the peer sent no headers within
// Bounds.Headers, or no byte of the body within Bounds.Idle. It matches
// os.ErrDeadlineExceeded (errors.Is) and says Timeout() like net.Error.
type TimeoutError struct {
	// Server is the peer's scheme and host, such as http://127.0.0.1:7780.
	Server string
	// Method and Path are the request's.
	Method, Path string
	Phase        Phase
	// Waited is the bound that ran out.
	Waited time.Duration
	// Hint ends the message (Bounds.Hint).
	Hint string
}

func (e *TimeoutError) Error() string {
	var msg string
	if e.Phase == PhaseIdle {
		msg = fmt.Sprintf("the answer of the server at %s to %s %s sent nothing for %s", e.Server, e.Method, e.Path, Seconds(e.Waited))
	} else {
		msg = fmt.Sprintf("the server at %s did not answer %s %s within %s", e.Server, e.Method, e.Path, Seconds(e.Waited))
	}
	msg += " (it accepted the connection: it may be stopped or overloaded)"
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// Timeout reports true, as a net.Error that timed out does.
func (e *TimeoutError) Timeout() bool { return true }

// Unwrap makes errors.Is(err, os.ErrDeadlineExceeded) true.
func (e *TimeoutError) Unwrap() error { return os.ErrDeadlineExceeded }

// Seconds formats d as whole seconds ("60 s"), or with one decimal under
// ten seconds when it has a fraction ("2.5 s").
func Seconds(d time.Duration) string {
	s := d.Seconds()
	if s < 10 && s != float64(int64(s)) {
		return fmt.Sprintf("%.1f s", s)
	}
	return fmt.Sprintf("%d s", int64(s+0.5))
}

// Transport is an http.RoundTripper that applies the Bounds of each
// request's context (WithBounds), or Default when it carries none.
type Transport struct {
	// Base sends the requests (nil: http.DefaultTransport).
	Base http.RoundTripper
	// Default applies to requests whose context carries no Bounds.
	Default Bounds
}

// RoundTrip sends req, bounding the wait for its headers and for each
// read of its body. A bound that runs out is a *TimeoutError, from
// RoundTrip or from the body's Read.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	b, ok := BoundsFrom(req.Context())
	if !ok {
		b = t.Default
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return RoundTrip(base, req, b)
}

// RoundTrip sends req with rt under the bounds b (see Transport).
func RoundTrip(rt http.RoundTripper, req *http.Request, b Bounds) (*http.Response, error) {
	if b.Headers <= 0 && b.Idle <= 0 {
		return rt.RoundTrip(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &waiter{cancel: cancel, b: b, server: req.URL.Scheme + "://" + req.URL.Host, method: req.Method, path: req.URL.Path}
	if b.Headers > 0 {
		w.timer = time.AfterFunc(b.Headers, func() { w.fire(PhaseHeaders, b.Headers) })
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { w.progress() },
		})
	}
	out := req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody && b.Headers > 0 {
		out.Body = &progressBody{rc: req.Body, w: w}
	}
	resp, err := rt.RoundTrip(out)
	w.headersDone()
	if terr := w.timedOut(); terr != nil {
		if err == nil {
			resp.Body.Close()
		}
		cancel(nil)
		return nil, terr
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	resp.Body = &idleBody{rc: resp.Body, w: w}
	return resp, nil
}

// waiter is one request's bounds: the headers timer, then the body's.
type waiter struct {
	cancel context.CancelCauseFunc
	b      Bounds
	server string
	method string
	path   string

	mu    sync.Mutex
	timer *time.Timer // the headers timer, then each read's
	done  bool        // the headers came (or the round trip failed)
	err   *TimeoutError
}

func (w *waiter) fire(p Phase, d time.Duration) {
	w.mu.Lock()
	if w.err == nil {
		w.err = &TimeoutError{Server: w.server, Method: w.method, Path: w.path, Phase: p, Waited: d, Hint: w.b.Hint}
	}
	err := w.err
	w.mu.Unlock()
	w.cancel(err)
}

// progress restarts the headers clock (an upload moved, or ended).
func (w *waiter) progress() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done && w.timer != nil && w.err == nil {
		w.timer.Reset(w.b.Headers)
	}
}

// pause stops the headers clock until the next progress.
func (w *waiter) pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
}

func (w *waiter) headersDone() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

func (w *waiter) timedOut() *TimeoutError {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// progressBody is a request body whose reads restart the headers clock.
type progressBody struct {
	rc io.ReadCloser
	w  *waiter
}

// Read stops the headers clock while it waits for the body's source (a
// slow producer is not a silent peer) and restarts it after.
func (p *progressBody) Read(b []byte) (int, error) {
	p.w.pause()
	n, err := p.rc.Read(b)
	p.w.progress()
	return n, err
}

func (p *progressBody) Close() error { return p.rc.Close() }

// idleBody bounds each read of an answer's body by Bounds.Idle.
type idleBody struct {
	rc    io.ReadCloser
	w     *waiter
	timer *time.Timer
}

func (b *idleBody) Read(p []byte) (int, error) {
	if terr := b.w.timedOut(); terr != nil {
		return 0, terr
	}
	if d := b.w.b.Idle; d > 0 {
		if b.timer == nil {
			b.timer = time.AfterFunc(d, func() { b.w.fire(PhaseIdle, d) })
		} else {
			b.timer.Reset(d)
		}
	}
	n, err := b.rc.Read(p)
	if b.timer != nil {
		b.timer.Stop()
	}
	if err != nil && err != io.EOF {
		if terr := b.w.timedOut(); terr != nil {
			return n, terr
		}
	}
	return n, err
}

func (b *idleBody) Close() error {
	if b.timer != nil {
		b.timer.Stop()
	}
	err := b.rc.Close()
	b.w.cancel(nil)
	return err
}

// Heartbeat calls beat every tick from a goroutine of its own until stop
// is called; stop returns once that goroutine is done, so beat is never
// called after it. beat decides whether the stream was quiet long enough
// for a heartbeat, and takes the writer's lock itself.
func Heartbeat(tick time.Duration, beat func()) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				beat()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-exited
	}
}

// IsTimeout reports whether err is (or wraps) a *TimeoutError.
func IsTimeout(err error) bool {
	var te *TimeoutError
	return errors.As(err, &te)
}
