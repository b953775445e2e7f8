-- +goose Up
-- PostgreSQL twin of migrations/00006_device_login.sql (same version, same meaning; see the
-- package doc): INTEGER is BIGINT, REAL is DOUBLE PRECISION, BLOB is BYTEA.
-- Device login (RFC 8628): a CLI asks for a device code and a user code; an
-- administrator approves the user code in the dashboard, choosing the new
-- key's name and limits; the CLI's next poll with the device code gets the
-- key, once. Both codes are stored as SHA-256 hashes only (like api_keys):
-- the database never holds a code that could be polled or approved.
-- state: pending -> approved | denied; approved -> redeemed (the key was
-- handed out; the device code is spent).
CREATE TABLE device_codes (
    device_hash         TEXT PRIMARY KEY,
    user_hash           TEXT NOT NULL UNIQUE,
    state               TEXT NOT NULL,
    client_name         TEXT NOT NULL DEFAULT '',
    trial_requested     BIGINT NOT NULL DEFAULT 0,
    created_at          BIGINT NOT NULL,
    expires_at          BIGINT NOT NULL,
    interval_seconds    BIGINT NOT NULL,
    last_poll_at        BIGINT,
    key_name            TEXT NOT NULL DEFAULT '',
    daily_limit_micros  BIGINT NOT NULL DEFAULT 0,
    trial_seconds       BIGINT NOT NULL DEFAULT 0,
    decided_by          TEXT NOT NULL DEFAULT '',
    decided_at          BIGINT,
    key_id              TEXT NOT NULL DEFAULT ''
);
CREATE INDEX device_codes_expires ON device_codes(expires_at);

-- Trial allowances: a key here may run its sandboxes for allowance_seconds
-- of sandbox time in total (wall seconds in usage_intervals), then creates
-- are refused.
CREATE TABLE key_trials (
    key_id             TEXT PRIMARY KEY,
    allowance_seconds  BIGINT NOT NULL
);

-- +goose Down
DROP TABLE key_trials;
DROP TABLE device_codes;
