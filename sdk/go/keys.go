package withruntime

import (
	"context"
	"net/url"
)

// CreateKey creates an API key named name and returns it with its Secret,
// which is shown this once. dailyLimitMicros caps what the key's
// sandboxes may cost per UTC day, in micro-dollars (1 USD = 1,000,000; 0:
// no limit). Errors: ErrBadRequest (an empty or too long name, a negative
// limit), ErrUnauthorized.
func (c *Client) CreateKey(ctx context.Context, name string, dailyLimitMicros int64) (KeyInfo, error) {
	return c.CreateKeyWith(ctx, CreateKeyRequest{Name: name, DailyLimitMicros: dailyLimitMicros})
}

// CreateKeyWith is CreateKey with every field of the request: its name,
// daily limit and quotas (DiskQuotaMiB, PausedQuota, SandboxesQuota).
// Errors as CreateKey's (a negative or too large quota: ErrBadRequest).
func (c *Client) CreateKeyWith(ctx context.Context, req CreateKeyRequest) (KeyInfo, error) {
	var out KeyInfo
	err := c.doJSON(ctx, "POST", "/v1/keys", req, &out)
	return out, err
}

// ListKeys lists every API key of the server, revoked ones included,
// oldest first, without their secrets. Errors: ErrUnauthorized.
func (c *Client) ListKeys(ctx context.Context) ([]KeyInfo, error) {
	var out KeyList
	if err := c.doJSON(ctx, "GET", "/v1/keys", nil, &out); err != nil {
		return nil, err
	}
	return out.Keys, nil
}

// RevokeKey revokes the live key id ("key_...", not its secret) at once:
// requests with it then fail with ErrUnauthorized. Sandboxes it created
// keep running. Errors: ErrNotFound (no such key, or already revoked),
// ErrConflict (id is the key this client authenticates with).
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	return c.doJSON(ctx, "DELETE", "/v1/keys/"+url.PathEscape(id), nil, nil)
}
