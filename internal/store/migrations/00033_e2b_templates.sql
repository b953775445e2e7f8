-- +goose Up
-- Templates built through the E2B-compatible API's template routes
-- (Template.build of E2B's SDKs). Each belongs to the API key that built it
-- and is named by an alias unique per key; id is E2B's templateID. template
-- is the Runtime template (private to key_id) of its last successful build,
-- '' before one; a rebuild makes a new Runtime template and points the row
-- at it. start_cmd and ready_cmd are what a sandbox of it starts and waits
-- for before its create answers ('' for none); cpu_count and memory_mib
-- size its sandboxes (0: the server's defaults); builds counts successful
-- builds.
CREATE TABLE e2b_templates (
    id          TEXT PRIMARY KEY,
    key_id      TEXT NOT NULL,
    alias       TEXT NOT NULL,
    template    TEXT NOT NULL DEFAULT '',
    build_id    TEXT NOT NULL DEFAULT '',
    start_cmd   TEXT NOT NULL DEFAULT '',
    ready_cmd   TEXT NOT NULL DEFAULT '',
    cpu_count   INTEGER NOT NULL DEFAULT 0,
    memory_mib  INTEGER NOT NULL DEFAULT 0,
    builds      INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE UNIQUE INDEX e2b_templates_key_alias ON e2b_templates (key_id, alias);

-- +goose Down
DROP TABLE e2b_templates;
