-- +goose Up
-- PostgreSQL twin of migrations/00004_secret_owner.sql (same version, same meaning; see the
-- package doc): INTEGER is BIGINT, REAL is DOUBLE PRECISION, BLOB is BYTEA.
-- Secrets belong to keys: one name per owner. owner is the id of the tenant
-- key (a key with a daily limit) that made the secret, or '' for the
-- server's own secrets, which every key without a limit shares; all secrets
-- from before this migration are the server's.
--
-- Values are sealed (NaCl secretbox) by the server with its secrets key,
-- which is kept outside the database; sealed_with is that key's id. '' marks
-- a value still in clear text from before this migration: the server seals
-- those at its next start and then rewrites the table (VACUUM FULL).
CREATE TABLE secrets_owned (
    owner        TEXT NOT NULL DEFAULT '',
    name         TEXT NOT NULL,
    value        BYTEA NOT NULL,
    sealed_with  TEXT NOT NULL DEFAULT '',
    hosts        TEXT NOT NULL DEFAULT '[]',
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (owner, name)
);
INSERT INTO secrets_owned (owner, name, value, sealed_with, hosts, created_at, updated_at)
    SELECT '', name, convert_to(value, 'UTF8'), '', hosts, created_at, updated_at FROM secrets;
DROP TABLE secrets;
ALTER TABLE secrets_owned RENAME TO secrets;

-- Whose secrets a sandbox's names refer to, fixed when it is created: a
-- restarted server binds the same owner's secrets again.
ALTER TABLE sandbox_network ADD COLUMN secret_owner TEXT NOT NULL DEFAULT '';

-- +goose Down
CREATE TABLE secrets_by_name (
    name        TEXT PRIMARY KEY,
    value       TEXT NOT NULL,
    hosts       TEXT NOT NULL DEFAULT '[]',
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
-- Sealed values cannot be opened here: going down keeps only the server's
-- secrets that are still in clear text.
INSERT INTO secrets_by_name (name, value, hosts, created_at, updated_at)
    SELECT name, convert_from(value, 'UTF8'), hosts, created_at, updated_at FROM secrets WHERE owner = '' AND sealed_with = '';
DROP TABLE secrets;
ALTER TABLE secrets_by_name RENAME TO secrets;
ALTER TABLE sandbox_network DROP COLUMN secret_owner;
