-- +goose Up
-- PostgreSQL twin of migrations/00002_usage.sql (same version, same meaning; see the
-- package doc): INTEGER is BIGINT, REAL is DOUBLE PRECISION, BLOB is BYTEA.
-- One row per metered interval of a running sandbox: the CPU it used
-- (runtime accounting), the wall time and the memory size × time. An
-- interval is written with its end; usage_cursor holds where the next one
-- starts, in the same transaction, so a restart neither loses nor repeats one.
CREATE TABLE usage_intervals (
    sandbox_id    TEXT NOT NULL,
    key_id        TEXT NOT NULL,
    start_at      BIGINT NOT NULL,
    end_at        BIGINT NOT NULL,
    cpu_seconds   DOUBLE PRECISION NOT NULL,
    wall_seconds  DOUBLE PRECISION NOT NULL,
    gib_seconds   DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (sandbox_id, start_at)
);
CREATE INDEX usage_intervals_end ON usage_intervals(end_at);
CREATE INDEX usage_intervals_key_end ON usage_intervals(key_id, end_at);

CREATE TABLE usage_cursor (
    sandbox_id  TEXT PRIMARY KEY,
    last_at     BIGINT NOT NULL,
    last_cpu    DOUBLE PRECISION NOT NULL,
    closed      BIGINT NOT NULL DEFAULT 0
);

-- Spending limits per API key (micro-dollars per UTC day; absent = none).
CREATE TABLE key_limits (
    key_id              TEXT PRIMARY KEY,
    daily_limit_micros  BIGINT NOT NULL
);

-- +goose Down
DROP TABLE key_limits;
DROP TABLE usage_cursor;
DROP TABLE usage_intervals;
