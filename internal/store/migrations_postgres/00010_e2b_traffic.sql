-- +goose Up
-- PostgreSQL twin of migrations/00010_e2b_traffic.sql (same version, same meaning; see the
-- package doc): INTEGER is BIGINT, REAL is DOUBLE PRECISION, BLOB is BYTEA.
-- The E2B-compatible API's domain mode (serve --e2b-domain): whether a
-- sandbox's ports answer on <port>-<sandbox>.<domain> without its traffic
-- access token (E2B's network.allowPublicTraffic). A sandbox without a row
-- (made through Runtime's own API and never connected to through E2B's)
-- needs the token.
CREATE TABLE e2b_traffic (
    sandbox_id     TEXT PRIMARY KEY,
    public_traffic BIGINT NOT NULL
);

-- +goose Down
DROP TABLE e2b_traffic;
