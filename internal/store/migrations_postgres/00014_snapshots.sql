-- +goose Up
-- PostgreSQL twin of migrations/00014_snapshots.sql (same version, same meaning; see the
-- package doc): INTEGER is BIGINT, REAL is DOUBLE PRECISION, BLOB is BYTEA.
-- Snapshots (sandbox/snapshot.go): a running sandbox saved whole (mode
-- 'full': memory, processes, files) while it ran on, from which new
-- sandboxes start. The image is the driver's (gvisor/snapshots/<id>); this
-- row says it exists and whose it is.
--   key_id      the key that made it: only that key sees, uses or deletes it
--   name        '' or a name unique among the key's snapshots
--   source_id   the sandbox it was taken of; template that sandbox's
--   state       'creating' while the image is written, then 'ready'
--   bytes       the image's size on the host's disk (billed at the storage
--               price, counted in the key's disk quota)
--   cpu, memory_mib, disk_mib  the source's sizes: a sandbox made from it has
--               at least its memory and exactly its disk
--   driver      the driver that holds the image
CREATE TABLE snapshots (
    id          TEXT PRIMARY KEY,
    key_id      TEXT NOT NULL,
    name        TEXT NOT NULL DEFAULT '',
    source_id   TEXT NOT NULL,
    template    TEXT NOT NULL,
    mode        TEXT NOT NULL,
    state       TEXT NOT NULL,
    bytes       BIGINT NOT NULL DEFAULT 0,
    cpu         DOUBLE PRECISION NOT NULL,
    memory_mib  BIGINT NOT NULL,
    disk_mib    BIGINT NOT NULL,
    driver      TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE UNIQUE INDEX snapshots_key_name ON snapshots(key_id, name) WHERE name != '';
CREATE INDEX snapshots_key_created ON snapshots(key_id, created_at);

-- +goose Down
DROP INDEX snapshots_key_created;
DROP INDEX snapshots_key_name;
DROP TABLE snapshots;
