-- +goose Up
CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    prefix      TEXT NOT NULL,
    hash        TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);

CREATE TABLE sandboxes (
    id             TEXT PRIMARY KEY,
    key_id         TEXT NOT NULL,
    template       TEXT NOT NULL,
    state          TEXT NOT NULL,
    cpu            REAL NOT NULL,
    memory_mib     INTEGER NOT NULL,
    disk_mib       INTEGER NOT NULL,
    env            TEXT NOT NULL DEFAULT '{}',
    metadata       TEXT NOT NULL DEFAULT '{}',
    created_at     INTEGER NOT NULL,
    lease_ends_at  INTEGER NOT NULL,
    ended_at       INTEGER,
    end_reason     TEXT NOT NULL DEFAULT '',
    driver         TEXT NOT NULL,
    driver_state   BLOB
);
CREATE INDEX sandboxes_state ON sandboxes(state);
CREATE INDEX sandboxes_key ON sandboxes(key_id);

-- +goose Down
DROP TABLE sandboxes;
DROP TABLE api_keys;
