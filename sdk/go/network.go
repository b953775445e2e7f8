package withruntime

import (
	"context"
	"net/url"
	"time"
)

// NetworkPolicy is a sandbox's network, enforced on the host:
// {Internet: false} (the default: loopback only), {Internet: true} (every
// public destination, minus Deny), or an Allow list of host names,
// "*.wildcards", IP addresses and CIDRs. Private, loopback, link-local,
// CGNAT and metadata addresses are never reachable. The server checks the
// policy: an invalid one (such as Allow with Internet true) is
// ErrBadRequest, whose message says what is wrong.
type NetworkPolicy struct {
	// Internet allows every public destination not on Deny.
	Internet bool `json:"internet"`
	// Allow lists what the sandbox may reach when Internet is false: host
	// names ("api.example.com"), wildcards ("*.example.org": every
	// subdomain, not the apex), IP addresses and CIDRs ("203.0.113.0/24").
	Allow []string `json:"allow,omitempty"`
	// Deny lists exceptions, in the same forms; deny wins over allow.
	Deny []string `json:"deny,omitempty"`
}

// CreateSecretRequest is the body of POST /v1/secrets (see
// Client.SetSecret).
type CreateSecretRequest struct {
	// Name is the environment variable sandboxes see (letters, digits and
	// _, not starting with a digit).
	Name string `json:"name"`
	// Value is the credential (at most 8 KiB, no line breaks or NUL). No
	// answer, log or error of the server ever contains it.
	Value string `json:"value"`
	// Hosts are the host names (or "*.wildcards"; not IP addresses) whose
	// HTTPS requests get the value.
	Hosts []string `json:"hosts"`
	// Owner is the id of the tenant key the secret is for: a key without a
	// daily limit may name any tenant key (empty: the server's own
	// secrets); a tenant key may only leave it empty or name itself.
	Owner string `json:"owner,omitempty"`
}

// SecretInfo is a stored secret as the server describes it: never its
// value.
type SecretInfo struct {
	// Name is the secret's name and environment variable.
	Name string `json:"name"`
	// Owner is the id of the tenant key the secret belongs to; empty for
	// the server's own secrets (those of keys without a daily limit).
	Owner string `json:"owner,omitempty"`
	// Hosts are the hosts whose HTTPS requests get the value.
	Hosts []string `json:"hosts"`
	// CreatedAt is when the secret was first stored; UpdatedAt when its
	// value or hosts last changed (UTC).
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// SecretList is the body of GET /v1/secrets.
type SecretList struct {
	Secrets []SecretInfo `json:"secrets"`
}

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
