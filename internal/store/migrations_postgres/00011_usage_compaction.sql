-- +goose Up
-- PostgreSQL twin of migrations/00011_usage_compaction.sql (same version, same meaning; see the
-- package doc): INTEGER is BIGINT, REAL is DOUBLE PRECISION, BLOB is BYTEA.
-- Usage compaction (CompactUsage): every interval ending at or before
-- through_at (Unix ms) has been merged with the others of its sandbox, key
-- and UTC hour, so a compaction starts from there instead of rereading
-- history. One row; its UPDATE is also what keeps two compactions apart.
CREATE TABLE usage_compaction (
    id          BIGINT PRIMARY KEY CHECK (id = 1),
    through_at  BIGINT NOT NULL
);
INSERT INTO usage_compaction (id, through_at) VALUES (1, 0);

-- +goose Down
DROP TABLE usage_compaction;
