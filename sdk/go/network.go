package withruntime

import (
	"context"
	"net/url"
	"time"
)

// NetworkPolicy is a sandbox's network, enforced on the host:
// {Internet: false} (the default: loopback only), {Internet: true} (every
// public destination, minus Deny), or an Allow list of host names,
// "*.wildcards", IP addresses and CIDRs. Private, loopback, link-local and
// metadata addresses are never reachable.
type NetworkPolicy struct {
	// Internet allows every public destination not on Deny.
	Internet bool `json:"internet"`
	// Allow lists what the sandbox may reach when Internet is false.
	Allow []string `json:"allow,omitempty"`
	// Deny lists exceptions, in the same forms; deny wins over allow.
	Deny []string `json:"deny,omitempty"`
}

// CreateSecretRequest is the body of POST /v1/secrets.
type CreateSecretRequest struct {
	Name  string   `json:"name"`
	Value string   `json:"value"`
	Hosts []string `json:"hosts"`
}

// SecretInfo is a stored secret as listed: never its value.
type SecretInfo struct {
	Name      string    `json:"name"`
	Hosts     []string  `json:"hosts"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// SecretList is the body of GET /v1/secrets.
type SecretList struct {
	Secrets []SecretInfo `json:"secrets"`
}

// Network returns the sandbox's effective network policy.
func (s *Sandbox) Network(ctx context.Context) (NetworkPolicy, error) {
	var p NetworkPolicy
	err := s.c.doJSON(ctx, "GET", s.path("/network"), nil, &p)
	return p, err
}

// SetNetwork replaces the sandbox's network policy and returns the
// effective one. It applies to new connections; open ones stay open.
// An invalid policy is ErrBadRequest.
func (s *Sandbox) SetNetwork(ctx context.Context, p NetworkPolicy) (NetworkPolicy, error) {
	var out NetworkPolicy
	err := s.c.doJSON(ctx, "PUT", s.path("/network"), p, &out)
	return out, err
}

// SetSecret stores (or replaces) a write-only secret that sandboxes
// created with Options.Secrets use for requests to hosts.
func (c *Client) SetSecret(ctx context.Context, name, value string, hosts []string) (SecretInfo, error) {
	var out SecretInfo
	err := c.doJSON(ctx, "POST", "/v1/secrets", CreateSecretRequest{Name: name, Value: value, Hosts: hosts}, &out)
	return out, err
}

// ListSecrets lists the stored secrets (names and hosts only).
func (c *Client) ListSecrets(ctx context.Context) ([]SecretInfo, error) {
	var out SecretList
	if err := c.doJSON(ctx, "GET", "/v1/secrets", nil, &out); err != nil {
		return nil, err
	}
	return out.Secrets, nil
}

// DeleteSecret deletes a stored secret (ErrNotFound if there is none).
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	return c.doJSON(ctx, "DELETE", "/v1/secrets/"+url.PathEscape(name), nil, nil)
}
