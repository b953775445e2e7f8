-- +goose Up
-- PostgreSQL twin of migrations/00016_volumes.sql (same version, same meaning; see the
-- package doc): INTEGER is BIGINT.
-- Volumes (issue 28): storage that outlives sandboxes, owned by the key that
-- made it and named per key. size_mib is its size, a hard quota enforced by
-- the driver on the host. state: 'creating' while the driver makes it,
-- 'ready', 'deleting' while the driver removes it; a deleted volume's row
-- goes (its usage stays in the ledger under its id).
CREATE TABLE volumes (
    id          TEXT PRIMARY KEY,
    key_id      TEXT NOT NULL,
    name        TEXT NOT NULL,
    size_mib    BIGINT NOT NULL,
    state       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    driver      TEXT NOT NULL
);
CREATE UNIQUE INDEX volumes_key_name ON volumes(key_id, name);

-- The volumes each sandbox mounts, where, and whether read-only. A volume is
-- mounted while a sandbox of one of its rows is starting, running or paused;
-- rows of stopped sandboxes stay until the volume is deleted.
CREATE TABLE sandbox_volumes (
    sandbox_id  TEXT NOT NULL,
    volume_id   TEXT NOT NULL,
    path        TEXT NOT NULL,
    read_only   BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (sandbox_id, volume_id)
);
CREATE INDEX sandbox_volumes_volume ON sandbox_volumes(volume_id);

-- +goose Down
DROP INDEX sandbox_volumes_volume;
DROP TABLE sandbox_volumes;
DROP INDEX volumes_key_name;
DROP TABLE volumes;
