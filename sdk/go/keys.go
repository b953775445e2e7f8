package withruntime

import (
	"context"
	"net/url"
	"time"
)

// CreateKeyRequest is the body of POST /v1/keys (see Client.CreateKey).
type CreateKeyRequest struct {
	// Name labels the key, such as "ci" or "laptop" (1 to 100 characters).
	Name string `json:"name"`
	// DailyLimitMicros caps what the key's sandboxes may cost per UTC day,
	// in micro-dollars (1 USD = 1,000,000); 0: no limit.
	DailyLimitMicros int64 `json:"dailyLimitMicros,omitempty"`
	// DiskQuotaMiB bounds, in MiB, the host disk the key's sandboxes hold:
	// its running and paused sandboxes' DiskMiB plus its pause images.
	// 0: the server's default for a key with a daily limit (serve
	// --key-disk-quota-mib), none for an administrator's key.
	DiskQuotaMiB int64 `json:"diskQuotaMiB,omitempty"`
	// PausedQuota bounds how many of the key's sandboxes may be paused at
	// once, a count (0: as DiskQuotaMiB).
	PausedQuota int64 `json:"pausedQuota,omitempty"`
	// SandboxesQuota bounds how many sandboxes the key may hold at once,
	// starting, running and paused together, a count (0: as DiskQuotaMiB).
	SandboxesQuota int64 `json:"sandboxesQuota,omitempty"`
}

// KeyInfo is an API key as the server describes it. The secret itself is
// only in the answer to CreateKey.
type KeyInfo struct {
	// ID is the key's id ("key_..."), used to revoke it. It is not a
	// credential.
	ID string `json:"id"`
	// Name is the label given at creation.
	Name string `json:"name"`
	// Prefix is the start of the secret ("wr_" and 6 more characters), to
	// recognise it.
	Prefix string `json:"prefix"`
	// CreatedAt is when the key was created (UTC).
	CreatedAt time.Time `json:"createdAt"`
	// RevokedAt is when the key was revoked (UTC); nil while it is live.
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	// Secret is the bearer token ("wr_..."), set only in CreateKey's
	// answer: the server cannot show it again. Pass it to WithAPIKey.
	Secret string `json:"secret,omitempty"`
	// DailyLimitMicros is the key's spending limit in micro-dollars per
	// UTC day; 0 if it has none. Once the key's sandboxes have cost that
	// much today, they are stopped (EndReason "spending_limit") and its
	// creates fail with ErrSpendingLimit until midnight UTC.
	DailyLimitMicros int64 `json:"dailyLimitMicros,omitempty"`
	// DiskQuotaMiB is the disk quota that binds the key, in MiB: its own,
	// or the server's default for a key with a daily limit; 0: none. A
	// create or pause past it fails with ErrQuota (507).
	DiskQuotaMiB int64 `json:"diskQuotaMiB,omitempty"`
	// PausedQuota is how many of the key's sandboxes may be paused at
	// once (0: no bound); a pause past it fails with ErrQuota (429).
	PausedQuota int64 `json:"pausedQuota,omitempty"`
	// SandboxesQuota is how many sandboxes the key may hold at once,
	// starting, running and paused together (0: no bound); a create past
	// it fails with ErrQuota (429).
	SandboxesQuota int64 `json:"sandboxesQuota,omitempty"`
}

// KeyList is the body of GET /v1/keys.
type KeyList struct {
	Keys []KeyInfo `json:"keys"`
}

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
