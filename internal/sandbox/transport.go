package sandbox

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
)

// AgentTransport returns the HTTP transport to a running sandbox's agent,
// with the same errors as Running. When a round trip fails because the
// sandbox died or was stopped meanwhile, the transport returns only once the
// record says so, so that the caller's Running check explains the failure.
func (m *Manager) AgentTransport(ctx context.Context, id string) (http.RoundTripper, error) {
	_, ls, err := m.heldOrAttach(ctx, id)
	if err != nil {
		return nil, err
	}
	return agentTransport{ls}, nil
}

// settleWait bounds how long a failed round trip waits for the sandbox's
// record to catch up with its death. The watcher notices a dead sandbox
// within milliseconds; a hung agent in a live sandbox costs this delay.
const settleWait = 2 * time.Second

type agentTransport struct{ ls *liveSandbox }

func (t agentTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.ls.waitGate(req.Context()); err != nil { // a snapshot's save
		return nil, err
	}
	req, done := bindRequest(req, t.ls.requests())
	resp, err := t.ls.transport.RoundTrip(req)
	if err != nil {
		done()
		if perr := pausedError(req.Context()); perr != nil {
			return nil, perr
		}
	} else {
		resp.Body = &pausableBody{rc: resp.Body, ctx: req.Context(), done: done,
			ndjson: strings.HasPrefix(resp.Header.Get("Content-Type"), agentapi.ContentTypeNDJSON)}
	}
	if err != nil && req.Context().Err() == nil && isConnError(err) {
		select {
		case <-t.ls.gone:
		case <-time.After(settleWait):
		}
	}
	return resp, err
}

// isConnError reports whether err is the connection to the agent breaking
// or being refused (as when the sandbox dies), not a failure of the
// request itself (an upload over the cap, a client that went away).
func isConnError(err error) bool {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ENOENT) || errors.Is(err, net.ErrClosed)
}
