-- +goose Up
-- PostgreSQL twin of migrations/00007_dashboard_sessions.sql (same version, same meaning; see the
-- package doc): INTEGER is BIGINT, REAL is DOUBLE PRECISION, BLOB is BYTEA.
-- Dashboard sessions: a browser signed in with an API key holds a random
-- session token in a cookie; only the token's SHA-256 is stored. A session
-- ends at expires_at, at sign-out, or when its key is revoked.
CREATE TABLE dashboard_sessions (
    token_hash  TEXT PRIMARY KEY,
    key_id      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX dashboard_sessions_expires ON dashboard_sessions(expires_at);

-- +goose Down
DROP TABLE dashboard_sessions;
