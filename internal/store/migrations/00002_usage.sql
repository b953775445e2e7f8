-- +goose Up
-- One row per metered interval of a running sandbox: the CPU it used
-- (runtime accounting), the wall time and the memory size × time. An
-- interval is written with its end; usage_cursor holds where the next one
-- starts, in the same transaction, so a restart neither loses nor repeats one.
CREATE TABLE usage_intervals (
    sandbox_id    TEXT NOT NULL,
    key_id        TEXT NOT NULL,
    start_at      INTEGER NOT NULL,
    end_at        INTEGER NOT NULL,
    cpu_seconds   REAL NOT NULL,
    wall_seconds  REAL NOT NULL,
    gib_seconds   REAL NOT NULL,
    PRIMARY KEY (sandbox_id, start_at)
);
CREATE INDEX usage_intervals_end ON usage_intervals(end_at);
CREATE INDEX usage_intervals_key_end ON usage_intervals(key_id, end_at);

CREATE TABLE usage_cursor (
    sandbox_id  TEXT PRIMARY KEY,
    last_at     INTEGER NOT NULL,
    last_cpu    REAL NOT NULL,
    closed      INTEGER NOT NULL DEFAULT 0
);

-- Spending limits per API key (micro-dollars per UTC day; absent = none).
CREATE TABLE key_limits (
    key_id              TEXT PRIMARY KEY,
    daily_limit_micros  INTEGER NOT NULL
);

-- +goose Down
DROP TABLE key_limits;
DROP TABLE usage_cursor;
DROP TABLE usage_intervals;
