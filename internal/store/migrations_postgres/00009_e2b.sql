-- +goose Up
-- PostgreSQL twin of migrations/00009_e2b.sql (same version, same meaning; see the
-- package doc): INTEGER is BIGINT, REAL is DOUBLE PRECISION, BLOB is BYTEA.
-- The E2B-compatible API (internal/compat/e2b). A sandbox made or connected
-- to through it has data-plane access tokens ("envdAccessToken"): only their
-- SHA-256 is kept, one row per token (every connect hands out a new one, so
-- a token already given keeps working). template is the E2B template name
-- the sandbox was created with ("base", "code-interpreter-v1").
CREATE TABLE e2b_tokens (
    token_hash TEXT PRIMARY KEY,
    sandbox_id TEXT NOT NULL,
    template   TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX e2b_tokens_sandbox ON e2b_tokens (sandbox_id, created_at);

-- +goose Down
DROP TABLE e2b_tokens;
