package client

import (
	"context"
	"net/url"

	"withruntime.dev/runtime/internal/api"
)

// SetSecret stores (or replaces) a write-only secret.
func (c *Client) SetSecret(ctx context.Context, req api.CreateSecretRequest) (api.Secret, error) {
	var out api.Secret
	err := c.do(ctx, "POST", "/v1/secrets", req, &out)
	return out, err
}

// ListSecrets lists the secrets the key may see: a tenant key's own, every
// owner's for a key without a limit (names, owners and hosts, never values).
func (c *Client) ListSecrets(ctx context.Context) ([]api.Secret, error) {
	var out api.SecretList
	err := c.do(ctx, "GET", "/v1/secrets", nil, &out)
	return out.Secrets, err
}

// DeleteSecret deletes a secret of the key, or (for a key without a
// limit) of the tenant key owner when owner is not empty.
func (c *Client) DeleteSecret(ctx context.Context, name, owner string) error {
	path := "/v1/secrets/" + url.PathEscape(name)
	if owner != "" {
		path += "?owner=" + url.QueryEscape(owner)
	}
	return c.do(ctx, "DELETE", path, nil, nil)
}

// Network returns a sandbox's network policy.
func (c *Client) Network(ctx context.Context, id string) (api.NetworkPolicy, error) {
	var out api.NetworkPolicy
	err := c.do(ctx, "GET", "/v1/sandboxes/"+url.PathEscape(id)+"/network", nil, &out)
	return out, err
}

// SetNetwork replaces a sandbox's network policy.
func (c *Client) SetNetwork(ctx context.Context, id string, p api.NetworkPolicy) (api.NetworkPolicy, error) {
	var out api.NetworkPolicy
	err := c.do(ctx, "PUT", "/v1/sandboxes/"+url.PathEscape(id)+"/network", p, &out)
	return out, err
}
