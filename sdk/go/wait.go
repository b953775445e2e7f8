package withruntime

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

// Bounded waits. A server that accepted the connection and then stopped
// answering (stopped with SIGSTOP, a hung host) would otherwise hold a call
// forever: the SDK waits at most the response timeout for an answer's
// headers, beyond what the call runs on the server before it answers, and
// at most the idle timeout for each next byte of a stream or download. A
// bound that runs out is a *TimeoutError.
//
// (The server's own client code, internal/httpwait in the main module,
// applies the same rules; this SDK keeps to the standard library.)

// DefaultResponseTimeout is how long a call waits for an answer's headers,
// beyond what it runs on the server first, unless WithResponseTimeout says
// otherwise.
const DefaultResponseTimeout = 60 * time.Second

// DefaultIdleTimeout is how long a stream or download may go without a
// byte, unless WithIdleTimeout says otherwise. Every stream of the server
// carries a heartbeat line after 2 s without another, so any idle timeout
// of 5 s or more never fails a live stream.
const DefaultIdleTimeout = 60 * time.Second

// What calls run on the server before they answer, added to the response
// timeout: a sandbox's boot (the server bounds it at 2 min), a pause or
// resume (10 min), a template build's pull or upload before its stream
// begins, a code kernel's start (60 s).
const (
	bootWait       = 2 * time.Minute
	checkpointWait = 10 * time.Minute
	buildWait      = 2 * time.Minute
	kernelWait     = 60 * time.Second
)

// WithResponseTimeout bounds how long each call waits for the server's
// answer to begin (its headers), beyond what the call runs on the server
// before answering: a collected Exec its TimeoutSeconds (default 120 s),
// RunCode its timeout plus a kernel's start, Create a sandbox's boot (2
// min), Pause and Resume 10 min, a template build's pull 2 min. An upload
// that keeps moving restarts the clock. d <= 0: no bound. Default
// DefaultResponseTimeout (60 s).
func WithResponseTimeout(d time.Duration) ClientOption {
	return func(c *Client) { c.respTimeout = max(d, 0) }
}

// WithIdleTimeout bounds each read of a stream (ExecStream, ExecTo, a
// streamed RunCode, a template build's progress) or a download: no byte
// for d fails the call with a *TimeoutError. Time the caller spends between
// reads does not count. d <= 0: no bound. Default DefaultIdleTimeout (60
// s); 5 s or more is safe (the server sends a heartbeat every 2 s).
func WithIdleTimeout(d time.Duration) ClientOption {
	return func(c *Client) { c.idleTimeout = max(d, 0) }
}

// TimeoutError is a wait that ran out: the server sent no answer headers
// within the response timeout (Idle false), or a stream or download sent
// no byte within the idle timeout (Idle true). errors.Is(err,
// os.ErrDeadlineExceeded) is true for it.
type TimeoutError struct {
	// Server is the server's base URL.
	Server string
	// Method and Path are the request's, such as "GET" "/v1/sandboxes".
	Method, Path string
	// Idle says the wait was for a stream's next byte, not for headers.
	Idle bool
	// Seconds is the bound that ran out, in seconds.
	Seconds float64
}

// Error says what was waited for, from which server, for how long, and
// how to wait longer.
func (e *TimeoutError) Error() string {
	if e.Idle {
		return fmt.Sprintf("withruntime: the answer of the Runtime server at %s to %s %s sent nothing for %s "+
			"(it accepted the connection: it may be stopped or overloaded); WithIdleTimeout waits longer", e.Server, e.Method, e.Path, fmtSeconds(e.Seconds))
	}
	return fmt.Sprintf("withruntime: the Runtime server at %s did not answer %s %s within %s "+
		"(it accepted the connection: it may be stopped or overloaded); WithResponseTimeout waits longer", e.Server, e.Method, e.Path, fmtSeconds(e.Seconds))
}

// Timeout reports true, as a net.Error that timed out does.
func (e *TimeoutError) Timeout() bool { return true }

// Unwrap makes errors.Is(err, os.ErrDeadlineExceeded) true.
func (e *TimeoutError) Unwrap() error { return os.ErrDeadlineExceeded }

func fmtSeconds(s float64) string {
	if s < 10 && s != float64(int64(s)) {
		return fmt.Sprintf("%.1f s", s)
	}
	return fmt.Sprintf("%d s", int64(s+0.5))
}

type waitKey struct{}

// waitFor returns ctx saying that its call runs for up to d on the server
// before answering (added to the response timeout).
func waitFor(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, waitKey{}, d)
}

// execWait is what a collected exec of timeoutSeconds runs (0: the
// server's default, 120 s).
func execWait(timeoutSeconds float64) time.Duration {
	if timeoutSeconds <= 0 {
		timeoutSeconds = 120
	}
	return seconds(timeoutSeconds)
}

// seconds converts s to a duration, saturating.
func seconds(s float64) time.Duration {
	if s >= float64(1<<62)/float64(time.Second) {
		return 1 << 62
	}
	return time.Duration(s * float64(time.Second))
}

// boundedDo sends req with hc: its headers must come within headers (0:
// no bound; an upload's progress restarts the clock), then each read of
// the body gets a byte within idle (0: no bound). A bound that runs out is
// a *TimeoutError, from boundedDo or from the body's Read.
func boundedDo(hc *http.Client, req *http.Request, server string, headers, idle time.Duration) (*http.Response, error) {
	if headers <= 0 && idle <= 0 {
		return hc.Do(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &waiter{cancel: cancel, te: TimeoutError{Server: server, Method: req.Method, Path: req.URL.Path}, headers: headers, idle: idle}
	if headers > 0 {
		w.timer = time.AfterFunc(headers, func() { w.fire(false, headers) })
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { w.progress() }})
	}
	out := req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody && headers > 0 {
		out.Body = &progressBody{rc: req.Body, w: w}
	}
	resp, err := hc.Do(out)
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

// waiter is one request's bounds.
type waiter struct {
	cancel        context.CancelCauseFunc
	te            TimeoutError // Server, Method, Path
	headers, idle time.Duration
	mu            sync.Mutex
	timer         *time.Timer
	done          bool
	err           *TimeoutError
}

func (w *waiter) fire(idle bool, d time.Duration) {
	w.mu.Lock()
	if w.err == nil {
		te := w.te
		te.Idle, te.Seconds = idle, d.Seconds()
		w.err = &te
	}
	err := w.err
	w.mu.Unlock()
	w.cancel(err)
}

func (w *waiter) progress() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done && w.timer != nil && w.err == nil {
		w.timer.Reset(w.headers)
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

// idleBody bounds each read of an answer's body by the idle timeout.
type idleBody struct {
	rc    io.ReadCloser
	w     *waiter
	timer *time.Timer
}

func (b *idleBody) Read(p []byte) (int, error) {
	if terr := b.w.timedOut(); terr != nil {
		return 0, terr
	}
	if d := b.w.idle; d > 0 {
		if b.timer == nil {
			b.timer = time.AfterFunc(d, func() { b.w.fire(true, d) })
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

// isTimeout reports whether err is (or wraps) a *TimeoutError.
func isTimeout(err error) bool {
	var te *TimeoutError
	return errors.As(err, &te)
}
