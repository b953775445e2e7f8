-- +goose Up
-- E2B's signed file URLs (download_url, upload_url) are signed by the SDK
-- with the sandbox's access token itself, which the facade keeps only as a
-- hash. A token is now derived from the server's secrets key and this
-- per-token nonce (internal/compat/e2b/signed.go), so the facade can work
-- the token out again to check a signature; tokens minted before have no
-- nonce ('') and open the sandbox as before, but sign no URL.
ALTER TABLE e2b_tokens ADD COLUMN nonce TEXT NOT NULL DEFAULT '';
-- E2B's network.mask_request_host: the Host header a program in the
-- sandbox sees on requests relayed to its ports ("${PORT}" replaced by the
-- port); '' leaves the client's own.
ALTER TABLE e2b_traffic ADD COLUMN mask_host TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE e2b_traffic DROP COLUMN mask_host;
ALTER TABLE e2b_tokens DROP COLUMN nonce;
