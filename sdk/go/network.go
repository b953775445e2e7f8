package withruntime

import (
	"context"
	"net/url"
)

// Network returns the sandbox's effective (normalized) network policy, as
// the host enforces it now. Errors: ErrNotFound, ErrConflict (still
// starting), ErrLeaseEnded, ErrSandboxStopped.
func (s *Sandbox) Network(ctx context.Context) (NetworkPolicy, error) {
	var p NetworkPolicy
	err := s.c.doJSON(ctx, "GET", s.path("/network"), nil, &p)
	return p, err
}

// SetNetwork replaces the sandbox's network policy and returns the
// effective one. It applies to new connections and DNS queries; open
// connections stay open. Errors: ErrBadRequest (an invalid policy; the
// message says what is wrong), ErrNotFound, ErrLeaseEnded,
// ErrSandboxStopped.
func (s *Sandbox) SetNetwork(ctx context.Context, p NetworkPolicy) (NetworkPolicy, error) {
	var out NetworkPolicy
	err := s.c.doJSON(ctx, "PUT", s.path("/network"), p, &out)
	return out, err
}

// SetSecret stores (or replaces) a write-only secret and returns its
// description, without the value. A sandbox created with
// Options.Secrets naming it sees name as an environment variable holding a
// placeholder ("wr_placeholder_..."); the egress proxy replaces the
// placeholder with value in the headers of HTTPS requests to hosts, and
// nowhere else. Replacing a secret reaches the running sandboxes created
// with it from their next request. A secret belongs to the client's key: a
// tenant key's (one with a daily limit) are its own, others' are invisible
// to it. Errors: ErrBadRequest (a bad name, value or host; the
// message never contains the value), ErrUnauthorized.
func (c *Client) SetSecret(ctx context.Context, name, value string, hosts []string) (SecretInfo, error) {
	var out SecretInfo
	err := c.doJSON(ctx, "POST", "/v1/secrets", CreateSecretRequest{Name: name, Value: value, Hosts: hosts}, &out)
	return out, err
}

// ListSecrets lists the client's key's secrets (every owner's for a key
// without a daily limit), with their hosts and times; values are never
// returned. Errors: ErrUnauthorized.
func (c *Client) ListSecrets(ctx context.Context) ([]SecretInfo, error) {
	var out SecretList
	if err := c.doJSON(ctx, "GET", "/v1/secrets", nil, &out); err != nil {
		return nil, err
	}
	return out.Secrets, nil
}

// DeleteSecret deletes a stored secret of the client's key. Running
// sandboxes created with it send its placeholder unreplaced from their next
// request; new ones cannot name it. Errors: ErrNotFound (no such secret), ErrUnauthorized.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	return c.doJSON(ctx, "DELETE", "/v1/secrets/"+url.PathEscape(name), nil, nil)
}
