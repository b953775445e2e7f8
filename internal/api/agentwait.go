package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/httpwait"
)

// The server's waits on a sandbox's agent are bounded (issue 24, F11): root
// inside a sandbox can stall its agent (or answer in its place), and a
// request to it must not then hold a server goroutine until the lease
// ends. Three bounds apply to every round trip of the forwarder and of a
// create's first command:
//
//   - the answer's headers: within what the request itself runs (an exec's
//     timeoutSeconds, a wait's) plus agentGrace, or agentQuickWait for a
//     route that runs nothing long. A route whose answer has no bound of
//     its own (a wait without timeoutSeconds, a code cell, which may queue
//     behind another in its context) gets none: only the liveness probe.
//   - liveness: while the headers are awaited for longer than
//     agentProbeEvery, the agent's /health is asked every agentProbeEvery
//     (on an idle pooled connection or a new one); two probes in a row
//     unanswered within agentProbeTimeout mean a stalled agent, and the
//     request ends.
//   - each read of the answer's body (a stream, a download): agentIdle
//     without a byte. Streams carry a heartbeat every 2 s, so only a
//     stalled agent is that silent. An NDJSON stream then ends with an
//     error event (code agent_timeout) instead of being cut.
//
// A bound that runs out is 504 agent_timeout. A stalled agent is so
// found within about 1.5 min (two probes of agentProbeTimeout,
// agentProbeEvery apart), whatever the request.
//
// Variables only so that tests can shorten them.
var (
	agentGrace        = 30 * time.Second
	agentQuickWait    = 2 * time.Minute
	agentIdle         = 60 * time.Second
	agentProbeEvery   = 30 * time.Second
	agentProbeTimeout = 15 * time.Second
)

// codeAgentTimeout is the error code of a bound on the agent that ran out.
const codeAgentTimeout = "agent_timeout"

// errAgentStalled is the cause of a request ended because its sandbox's
// agent stopped answering /health.
var errAgentStalled = errors.New("the agent stopped answering its health check")

// agentBounds is how long the server waits on the agent for request r of
// route ar, whose checked JSON body decoded to req (agentRoute.check; nil
// without one).
func agentBounds(ar agentRoute, r *http.Request, req any) httpwait.Bounds {
	b := httpwait.Bounds{Headers: agentQuickWait, Idle: agentIdle}
	if wantsNDJSON(r) && ar.path != "code" {
		return b // a stream's headers come as it starts
	}
	switch ar.path {
	case "exec":
		var timeout float64
		if req, ok := req.(*execRequest); ok {
			timeout = req.TimeoutSeconds
		}
		b.Headers = execWait(timeout)
	case "processes/{pid}/wait":
		t, _ := strconv.ParseFloat(r.URL.Query().Get("timeoutSeconds"), 64)
		b.Headers = 0 // as long as the process runs: the probe alone
		if t > 0 {
			b.Headers = seconds(t) + agentGrace
		}
	case "code":
		b.Headers = 0 // a cell may wait for another in its context
	}
	return b
}

// execWait bounds the wait for a collected exec's answer: its timeout (0:
// the agent's default) plus agentGrace.
func execWait(timeoutSeconds float64) time.Duration {
	if timeoutSeconds <= 0 {
		timeoutSeconds = agentapi.DefaultExecTimeoutSeconds
	}
	return seconds(timeoutSeconds) + agentGrace
}

// seconds converts s seconds to a duration, saturating (timeouts may be as
// large as 1e9 s).
func seconds(s float64) time.Duration {
	if s >= float64(1<<62)/float64(time.Second) {
		return 1 << 62
	}
	return time.Duration(s * float64(time.Second))
}

// boundedAgent sends requests to one sandbox's agent under the bounds of
// their context (httpwait.WithBounds; none given: agentQuickWait and
// agentIdle), probing the agent's health while an answer is long in
// coming.
type boundedAgent struct {
	rt http.RoundTripper
	id string
}

func (s *Server) boundAgent(rt http.RoundTripper, id string) http.RoundTripper {
	return boundedAgent{rt: rt, id: id}
}

func (a boundedAgent) RoundTrip(req *http.Request) (*http.Response, error) {
	b, ok := httpwait.BoundsFrom(req.Context())
	if !ok {
		b = httpwait.Bounds{Headers: agentQuickWait, Idle: agentIdle}
	}
	b.Hint = ""
	ctx, cancel := context.WithCancelCause(req.Context())
	p := &prober{a: a, ctx: ctx, cancel: cancel}
	p.timer = time.AfterFunc(agentProbeEvery, p.run)
	resp, err := httpwait.RoundTrip(a.rt, req.WithContext(ctx), b)
	p.stop()
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errAgentStalled) && req.Context().Err() == nil {
			err = cause
		}
		cancel(nil)
		return nil, err
	}
	resp.Body = &agentBody{rc: resp.Body, cancel: cancel, id: a.id,
		ndjson: isNDJSON(resp.Header.Get("Content-Type"))}
	return resp, nil
}

// prober asks the agent's /health every agentProbeEvery while one
// request's headers are awaited, and cancels the request
// (errAgentStalled) after two probes in a row got no answer within
// agentProbeTimeout.
type prober struct {
	a      boundedAgent
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer

	mu      sync.Mutex
	stopped bool // the headers came (or the round trip failed)
	missed  int
}

func (p *prober) run() {
	ok := p.a.healthy(p.ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.ctx.Err() != nil {
		return
	}
	if ok {
		p.missed = 0
	} else if p.missed++; p.missed >= 2 {
		p.cancel(errAgentStalled)
		return
	}
	p.timer.Reset(agentProbeEvery)
}

// stop ends the probes; none cancels the request after it.
func (p *prober) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.timer.Stop()
}

// healthy reports whether the agent answers GET /health within
// agentProbeTimeout.
func (a boundedAgent) healthy(ctx context.Context) bool {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), agentProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, "http://agent/health", nil)
	if err != nil {
		return false
	}
	resp, err := a.rt.RoundTrip(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func isNDJSON(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == agentapi.ContentTypeNDJSON
}

// agentBody is an agent's answer whose reads are bounded (see
// httpwait.Bounds.Idle). An NDJSON stream whose bound runs out ends with
// an agent_timeout error event, then EOF; another answer fails with
// the *httpwait.TimeoutError.
type agentBody struct {
	rc     io.ReadCloser
	cancel context.CancelCauseFunc
	id     string
	ndjson bool
	last   byte   // the last byte passed on
	tail   []byte // the error event still to pass on
	ended  bool
}

func (b *agentBody) Read(p []byte) (int, error) {
	if b.tail != nil {
		n := copy(p, b.tail)
		if b.tail = b.tail[n:]; len(b.tail) == 0 {
			b.tail, b.ended = nil, true
		}
		return n, nil
	}
	if b.ended {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if n > 0 {
		b.last = p[n-1]
	}
	var te *httpwait.TimeoutError
	if err == nil || !errors.As(err, &te) || !b.ndjson {
		return n, err
	}
	line, _ := json.Marshal(agentapi.Event{Type: "error", Error: &agentapi.Error{Code: codeAgentTimeout, Message: agentTimeoutMessage(b.id, err)}})
	if b.last != '\n' && b.last != 0 {
		line = append([]byte{'\n'}, line...)
	}
	b.tail = append(line, '\n')
	if n > 0 {
		return n, nil
	}
	return b.Read(p)
}

func (b *agentBody) Close() error {
	err := b.rc.Close()
	b.cancel(nil)
	return err
}

// agentTimeoutError is the API's answer (504 agent_timeout) for a bound
// on sandbox id's agent that ran out, or nil when err is not one.
func agentTimeoutError(id string, err error) error {
	if !httpwait.IsTimeout(err) && !errors.Is(err, errAgentStalled) {
		return nil
	}
	return &httpError{status: http.StatusGatewayTimeout, code: codeAgentTimeout, msg: agentTimeoutMessage(id, err)}
}

// agentTimeoutMessage says which bound on sandbox id's agent ran out.
func agentTimeoutMessage(id string, err error) string {
	why := ""
	var te *httpwait.TimeoutError
	switch {
	case errors.As(err, &te) && te.Phase == httpwait.PhaseIdle:
		why = fmt.Sprintf("its answer sent nothing for %s (a live stream has a heartbeat every %d s)", httpwait.Seconds(te.Waited), agentapi.HeartbeatSeconds)
	case errors.As(err, &te):
		why = fmt.Sprintf("it did not answer within %s (the request's own time plus %s)", httpwait.Seconds(te.Waited), httpwait.Seconds(agentGrace))
	default:
		why = fmt.Sprintf("it stopped answering: two health checks in a row got no answer within %s", httpwait.Seconds(agentProbeTimeout))
	}
	return strings.Join([]string{
		fmt.Sprintf("sandbox %s: its agent is stalled: %s", id, why),
		"something inside the sandbox may have stopped it or taken all its CPU; delete the sandbox if it stays so",
	}, "; ")
}
