-- +goose Up
-- PostgreSQL twin of migrations/00001_init.sql (same version, same meaning; see the
-- package doc): INTEGER is BIGINT, REAL is DOUBLE PRECISION, BLOB is BYTEA.
CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    prefix      TEXT NOT NULL,
    hash        TEXT NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);

CREATE TABLE sandboxes (
    id             TEXT PRIMARY KEY,
    key_id         TEXT NOT NULL,
    template       TEXT NOT NULL,
    state          TEXT NOT NULL,
    cpu            DOUBLE PRECISION NOT NULL,
    memory_mib     BIGINT NOT NULL,
    disk_mib       BIGINT NOT NULL,
    env            TEXT NOT NULL DEFAULT '{}',
    metadata       TEXT NOT NULL DEFAULT '{}',
    created_at     BIGINT NOT NULL,
    lease_ends_at  BIGINT NOT NULL,
    ended_at       BIGINT,
    end_reason     TEXT NOT NULL DEFAULT '',
    driver         TEXT NOT NULL,
    driver_state   BYTEA
);
CREATE INDEX sandboxes_state ON sandboxes(state);
CREATE INDEX sandboxes_key ON sandboxes(key_id);

-- +goose Down
DROP TABLE sandboxes;
DROP TABLE api_keys;
