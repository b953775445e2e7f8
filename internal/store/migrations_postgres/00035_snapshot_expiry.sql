-- +goose Up
-- A snapshot's end under the server's retention (serve --snapshot-retention):
--   expires_at  when the leader's sweep deletes it (Unix milliseconds); NULL:
--               kept until deleted (no retention when it was taken)
ALTER TABLE snapshots ADD COLUMN expires_at BIGINT;
CREATE INDEX snapshots_expires ON snapshots(expires_at) WHERE expires_at IS NOT NULL;

-- +goose Down
DROP INDEX snapshots_expires;
ALTER TABLE snapshots DROP COLUMN expires_at;
