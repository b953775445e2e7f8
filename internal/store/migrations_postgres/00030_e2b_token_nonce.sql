-- +goose Up
-- PostgreSQL twin of migrations/00030_e2b_token_nonce.sql (same version, same
-- meaning; see the package doc).
ALTER TABLE e2b_tokens ADD COLUMN nonce TEXT NOT NULL DEFAULT '';
-- E2B's network.mask_request_host: the Host header a program in the
-- sandbox sees on requests relayed to its ports ("${PORT}" replaced by the
-- port); '' leaves the client's own.
ALTER TABLE e2b_traffic ADD COLUMN mask_host TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE e2b_traffic DROP COLUMN mask_host;
ALTER TABLE e2b_tokens DROP COLUMN nonce;
