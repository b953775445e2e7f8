-- +goose Up
-- PostgreSQL twin of migrations/00012_key_quotas.sql (same version, same meaning; see the
-- package doc): INTEGER is BIGINT, REAL is DOUBLE PRECISION, BLOB is BYTEA.
-- Per-key quotas on what a key's sandboxes hold on the host (sandbox/quota.go).
-- A column at 0 means the server's default (serve --key-disk-quota-mib,
-- --key-paused-quota, --key-sandboxes-quota) for a tenant key, and no
-- per-key bound for an administrator's key (no daily limit); a key without
-- a row has every quota at 0.
--   disk_mib          MiB: the sum of its running and paused sandboxes'
--                     disk_mib plus its paused images' image_bytes
--   paused_sandboxes  count of its paused sandboxes
--   sandboxes         count of its starting, running and paused sandboxes
CREATE TABLE key_quotas (
    key_id            TEXT PRIMARY KEY,
    disk_mib          BIGINT NOT NULL DEFAULT 0,
    paused_sandboxes  BIGINT NOT NULL DEFAULT 0,
    sandboxes         BIGINT NOT NULL DEFAULT 0
);

-- A key's use is summed over its sandboxes that are not stopped at every
-- create and pause: by key and state, not over its whole history.
CREATE INDEX sandboxes_key_state ON sandboxes(key_id, state);

-- +goose Down
DROP INDEX sandboxes_key_state;
DROP TABLE key_quotas;
