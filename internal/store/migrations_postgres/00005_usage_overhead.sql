-- +goose Up
-- PostgreSQL twin of migrations/00005_usage_overhead.sql (same version, same meaning; see the
-- package doc): INTEGER is BIGINT, REAL is DOUBLE PRECISION, BLOB is BYTEA.
-- Metering bills what a sandbox's own processes used and records, apart,
-- the CPU its isolation layer (gVisor's kernel and file proxy) spent on the
-- host: cpu_seconds + overhead_cpu_seconds is the host CPU of the interval.
-- The cursor keeps the isolation layer's cumulative CPU beside the host's;
-- NULL when it was not measured (the next interval then bills all of its
-- host CPU, as before this migration).
ALTER TABLE usage_intervals ADD COLUMN overhead_cpu_seconds DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE usage_cursor ADD COLUMN last_overhead_cpu DOUBLE PRECISION;

-- +goose Down
ALTER TABLE usage_cursor DROP COLUMN last_overhead_cpu;
ALTER TABLE usage_intervals DROP COLUMN overhead_cpu_seconds;
