-- +goose Up
-- PostgreSQL twin of migrations/00003_network.sql (same version, same meaning; see the
-- package doc): INTEGER is BIGINT, REAL is DOUBLE PRECISION, BLOB is BYTEA.
-- The network policy and secret names of each sandbox (its egress), kept
-- beside the sandbox record so that a restarted server attaches it again.
CREATE TABLE sandbox_network (
    sandbox_id  TEXT PRIMARY KEY,
    policy      TEXT NOT NULL DEFAULT '{}',
    secrets     TEXT NOT NULL DEFAULT '[]'
);

-- Write-only secrets: the API never returns a value.
CREATE TABLE secrets (
    name        TEXT PRIMARY KEY,
    value       TEXT NOT NULL,
    hosts       TEXT NOT NULL DEFAULT '[]',
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);

-- +goose Down
DROP TABLE secrets;
DROP TABLE sandbox_network;
