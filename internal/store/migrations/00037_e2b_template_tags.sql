-- +goose Up
-- Tags of E2B templates (issue 30): a tag names one build of an E2B
-- template (e2b_templates.id), per API key. template is the Runtime template
-- (private to key_id) of that build, build_id its E2B build id; cpu_count and
-- memory_mib size its sandboxes (0: the server's defaults). A tag moves when
-- it is assigned again; a Runtime template is kept while a tag names it.
-- Every built template gets the 'default' tag for its current build.
CREATE TABLE e2b_template_tags (
    template_id TEXT NOT NULL,
    key_id      TEXT NOT NULL,
    tag         TEXT NOT NULL,
    build_id    TEXT NOT NULL,
    template    TEXT NOT NULL,
    cpu_count   INTEGER NOT NULL DEFAULT 0,
    memory_mib  INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (template_id, tag)
);
CREATE INDEX e2b_template_tags_key ON e2b_template_tags (key_id, template_id);
INSERT INTO e2b_template_tags (template_id, key_id, tag, build_id, template, cpu_count, memory_mib, created_at)
    SELECT id, key_id, 'default', build_id, template, cpu_count, memory_mib, updated_at FROM e2b_templates WHERE template <> '';

-- +goose Down
DROP TABLE e2b_template_tags;
