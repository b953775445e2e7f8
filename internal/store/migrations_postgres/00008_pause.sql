-- +goose Up
-- PostgreSQL twin of migrations/00008_pause.sql (same version, same meaning; see the
-- package doc): INTEGER is BIGINT, REAL is DOUBLE PRECISION, BLOB is BYTEA.
-- Pause and resume. A paused sandbox runs nothing: its memory, processes and
-- files are an image on the host's disk (image_bytes), kept from paused_at
-- until it is resumed or its retention ends. on_lease_end says what its
-- lease end does ('stop' or 'pause'); auto_resume whether a request to it
-- while paused resumes it first; timeout_seconds is the lease it was last
-- given, which a resume gives again.
ALTER TABLE sandboxes ADD COLUMN on_lease_end TEXT NOT NULL DEFAULT 'stop';
ALTER TABLE sandboxes ADD COLUMN auto_resume BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN timeout_seconds BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sandboxes ADD COLUMN paused_at BIGINT;
ALTER TABLE sandboxes ADD COLUMN image_bytes BIGINT NOT NULL DEFAULT 0;

-- A paused interval bills the stored image (GiB × seconds) and nothing of
-- CPU or memory: its cpu_seconds, wall_seconds and gib_seconds are 0.
ALTER TABLE usage_intervals ADD COLUMN storage_gib_seconds DOUBLE PRECISION NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE usage_intervals DROP COLUMN storage_gib_seconds;
ALTER TABLE sandboxes DROP COLUMN image_bytes;
ALTER TABLE sandboxes DROP COLUMN paused_at;
ALTER TABLE sandboxes DROP COLUMN timeout_seconds;
ALTER TABLE sandboxes DROP COLUMN auto_resume;
ALTER TABLE sandboxes DROP COLUMN on_lease_end;
