package wire

import "time"

// CreateKeyRequest is the body of POST /v1/keys.
type CreateKeyRequest struct {
	// Name labels the key, such as "ci" or "laptop" (1 to 100 characters).
	Name string `json:"name"`
	// DailyLimitMicros caps what the key's sandboxes may cost per UTC day,
	// in micro-dollars (0 or absent: no limit).
	DailyLimitMicros int64 `json:"dailyLimitMicros,omitempty"`
	// DiskQuotaMiB bounds, in MiB, the host disk the key's sandboxes hold:
	// its running and paused sandboxes' diskMiB plus its pause images'
	// bytes (0 or absent: the server's default for a tenant key, serve
	// --key-disk-quota-mib; none for an administrator's).
	DiskQuotaMiB int64 `json:"diskQuotaMiB,omitempty"`
	// PausedQuota bounds how many of the key's sandboxes may be paused at
	// once, a count (0 or absent: as DiskQuotaMiB).
	PausedQuota int64 `json:"pausedQuota,omitempty"`
	// SandboxesQuota bounds how many sandboxes the key may hold at once,
	// starting, running and paused together, a count (0 or absent: as
	// DiskQuotaMiB).
	SandboxesQuota int64 `json:"sandboxesQuota,omitempty"`
}

// Key is an API key as listed. The secret itself is only in the answer to
// its creation.
type Key struct {
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
	// RevokedAt is when the key was revoked (UTC); absent while it is live.
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	// Secret is the bearer token ("wr_..."), set only in the answer to the
	// key's creation: the server cannot show it again.
	Secret string `json:"secret,omitempty"`
	// DailyLimitMicros is the key's spending limit in micro-dollars per
	// UTC day (absent: none). Once the key's sandboxes have cost that much
	// today, they are stopped (endReason "spending_limit") and its creates
	// fail with 429 spending_limit until midnight UTC.
	DailyLimitMicros int64 `json:"dailyLimitMicros,omitempty"`
	// DiskQuotaMiB is the disk quota that binds the key, in MiB: its own,
	// or the server's default for a tenant key (absent: none). A create or
	// pause past it fails with 507 disk_quota_exceeded.
	DiskQuotaMiB int64 `json:"diskQuotaMiB,omitempty"`
	// PausedQuota is how many of the key's sandboxes may be paused at
	// once, a count (absent: no bound); a pause past it fails with 429
	// quota_exceeded.
	PausedQuota int64 `json:"pausedQuota,omitempty"`
	// SandboxesQuota is how many sandboxes the key may hold at once,
	// starting, running and paused together, a count (absent: no bound);
	// a create past it fails with 429 quota_exceeded.
	SandboxesQuota int64 `json:"sandboxesQuota,omitempty"`
}

// KeyList is the body of GET /v1/keys.
type KeyList struct {
	Keys []Key `json:"keys"`
}
