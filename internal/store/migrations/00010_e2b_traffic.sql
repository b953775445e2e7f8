-- +goose Up
-- The E2B-compatible API's domain mode (serve --e2b-domain): whether a
-- sandbox's ports answer on <port>-<sandbox>.<domain> without its traffic
-- access token (E2B's network.allowPublicTraffic). A sandbox without a row
-- (made through Runtime's own API and never connected to through E2B's)
-- needs the token.
CREATE TABLE e2b_traffic (
    sandbox_id     TEXT PRIMARY KEY,
    public_traffic INTEGER NOT NULL
);

-- +goose Down
DROP TABLE e2b_traffic;
