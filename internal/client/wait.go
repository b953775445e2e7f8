package client

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"withruntime.dev/runtime/internal/agentapi"
	"withruntime.dev/runtime/internal/httpwait"
)

// How long the CLI waits on a server that accepted the connection (issue
// 24, F11): every request waits at most ResponseTimeout for the answer's
// headers, beyond what the call runs on the server before it answers (a
// create boots a sandbox, a pause saves one: waitFor); every read of a
// stream or a download waits at most IdleTimeout for a byte (streams carry
// a heartbeat every 2 s). A bound that runs out is a
// *httpwait.TimeoutError that names the server, the request and the
// seconds waited.
const (
	// EnvResponseTimeout sets ResponseTimeout in seconds (0: no bound).
	EnvResponseTimeout = "WITHRUNTIME_RESPONSE_TIMEOUT"
	// EnvIdleTimeout sets IdleTimeout in seconds (0: no bound).
	EnvIdleTimeout = "WITHRUNTIME_IDLE_TIMEOUT"
	// DefaultResponseTimeout is ResponseTimeout when neither the Client
	// nor the environment sets one.
	DefaultResponseTimeout = 60 * time.Second
	// DefaultIdleTimeout is IdleTimeout likewise.
	DefaultIdleTimeout = 60 * time.Second
)

// What calls run on the server before they answer, added to the response
// timeout: the server's own bounds on a sandbox's boot and on a pause or
// resume, and a template build's pull or upload before its stream begins.
const (
	bootWait       = 2 * time.Minute
	checkpointWait = 10 * time.Minute
	buildWait      = 2 * time.Minute
)

type waitKey struct{}

// waitFor returns ctx saying that the call runs for up to d on the server
// before it answers (see ResponseTimeout).
func waitFor(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, waitKey{}, d)
}

// execWait is what an exec of timeoutSeconds runs (0: the agent's default).
func execWait(timeoutSeconds float64) time.Duration {
	if timeoutSeconds <= 0 {
		timeoutSeconds = agentapi.DefaultExecTimeoutSeconds
	}
	return time.Duration(timeoutSeconds * float64(time.Second))
}

// bounds is how long request ctx of c waits.
func (c *Client) bounds(ctx context.Context) (httpwait.Bounds, error) {
	resp, err := timeoutOf(c.ResponseTimeout, EnvResponseTimeout, DefaultResponseTimeout)
	if err != nil {
		return httpwait.Bounds{}, err
	}
	idle, err := timeoutOf(c.IdleTimeout, EnvIdleTimeout, DefaultIdleTimeout)
	if err != nil {
		return httpwait.Bounds{}, err
	}
	if extra, ok := ctx.Value(waitKey{}).(time.Duration); ok && resp > 0 {
		resp += extra
	}
	return httpwait.Bounds{Headers: resp, Idle: idle,
		Hint: fmt.Sprintf("set %s (or %s for a stream) to the seconds to wait, 0 for no bound", EnvResponseTimeout, EnvIdleTimeout)}, nil
}

// timeoutOf is the Client's field v when set (negative: none), else the
// environment variable env in seconds (0: none), else def.
func timeoutOf(v time.Duration, env string, def time.Duration) (time.Duration, error) {
	switch {
	case v < 0:
		return 0, nil
	case v > 0:
		return v, nil
	}
	s := strings.TrimSpace(os.Getenv(env))
	if s == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1e9 {
		return 0, fmt.Errorf("%s=%q is not a number of seconds from 0 (no bound) to 1e9", env, s)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// httpClient is c.HTTP (or http.DefaultClient) with its transport bounded
// by the bounds each request's context carries.
func (c *Client) httpClient() *http.Client {
	c.once.Do(func() {
		hc := c.HTTP
		if hc == nil {
			hc = http.DefaultClient
		}
		bounded := *hc
		bounded.Transport = &httpwait.Transport{Base: hc.Transport}
		c.bounded = &bounded
	})
	return c.bounded
}

// waitState is the Client's lazily made bounded HTTP client.
type waitState struct {
	once    sync.Once
	bounded *http.Client
}
