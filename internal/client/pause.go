package client

import (
	"context"
	"net/http"
	"net/url"

	"withruntime.dev/runtime/internal/api"
)

// PauseSandbox saves a running sandbox and stops it (POST .../pause) and
// returns its record (state "paused").
func (c *Client) PauseSandbox(ctx context.Context, id string) (api.Sandbox, error) {
	return c.PauseSandboxMode(ctx, id, "")
}

// PauseSandboxMode pauses a sandbox in mode ("full", "" meaning it, or
// "filesystem": its files alone, its processes ended) and returns its
// record.
func (c *Client) PauseSandboxMode(ctx context.Context, id, mode string) (api.Sandbox, error) {
	var sb api.Sandbox
	var body any
	if mode != "" {
		body = api.PauseRequest{Mode: mode}
	}
	return sb, c.do(waitFor(ctx, checkpointWait), http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/pause", body, &sb)
}

// ResumeSandbox boots a paused sandbox where it was (POST .../resume), with
// a lease of timeoutSeconds (0: the lease it was last given), and returns
// its record.
func (c *Client) ResumeSandbox(ctx context.Context, id string, timeoutSeconds int64) (api.Sandbox, error) {
	var sb api.Sandbox
	return sb, c.do(waitFor(ctx, checkpointWait), http.MethodPost, "/v1/sandboxes/"+url.PathEscape(id)+"/resume", api.ResumeRequest{TimeoutSeconds: timeoutSeconds}, &sb)
}
