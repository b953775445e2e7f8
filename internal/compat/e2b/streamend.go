package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"withruntime.dev/runtime/internal/api"
)

// errAnswerCut is the read error of an in-process answer that its handler
// aborted after it began (http.ErrAbortHandler): the API's reverse proxy
// does so when the sandbox's agent goes away mid-stream, as when the
// sandbox is deleted while a command streams.
var errAnswerCut = errors.New("the answer broke off: the sandbox's agent went away mid-answer")

// stoppedWait bounds how long a broken stream waits for the sandbox's
// record to say it stopped: a delete marks it stopped before it destroys
// it, a sandbox that died on its own is recorded within milliseconds.
const stoppedWait = 2 * time.Second

// streamBroke is the Connect error of a stream (what names it) that ended
// before its end event, readErr being why (nil: it just ended). When the
// sandbox stopped meanwhile (whyStopped) it does not return: it drops the
// connection (panics with http.ErrAbortHandler), as E2B's does.
func (s *Server) streamBroke(ctx context.Context, t target, what string, readErr error) error {
	if ctx.Err() != nil {
		return ctx.Err() // the client went away; nobody to tell
	}
	if err := s.whyStopped(ctx, t); err != nil {
		// The sandbox was killed or its lease ended: the connection drops,
		// as it does when an E2B sandbox goes away under a stream. The
		// SDKs then ask envd's /health (502 for a stopped sandbox) and
		// raise their "sandbox was killed or reached its end of life"
		// timeout error; an in-band error here read as a network failure.
		s.cfg.Log.Debug("e2b: stream of a stopped sandbox dropped", "sandbox", t.id, "what", what, "why", err)
		panic(http.ErrAbortHandler)
	}
	if readErr != nil {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s broke: %w", what, readErr))
	}
	return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%s ended before its end event", what))
}

// whyStopped waits up to stoppedWait for sandbox t to show as stopped and
// returns the API's error for a request to it then (410 sandbox_stopped or
// lease_ended: "sandbox ... was destroyed ...", as a native client gets
// it), or nil when it still runs (or cannot be asked).
func (s *Server) whyStopped(ctx context.Context, t target) error {
	actx := context.WithoutCancel(ctx)
	deadline := time.Now().Add(stoppedWait)
	for {
		var sb api.Sandbox
		if err := s.api.json(actx, t.as, "GET", t.base(), nil, &sb); err != nil {
			return err
		}
		if sb.State == "stopped" {
			// A sandbox-scoped request answers why, in the API's words.
			if err := s.api.json(actx, t.as, "GET", t.base()+"/processes", nil, nil); err != nil {
				return err
			}
			return &apiError{Status: http.StatusGone, Code: "sandbox_stopped", Message: fmt.Sprintf("sandbox %s was stopped (%s)", t.id, sb.EndReason)}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}
