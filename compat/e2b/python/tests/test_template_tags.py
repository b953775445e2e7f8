"""Template tags through the unmodified SDK: a build named "name:tag" gets
that tag; Template.assign_tags names its build with more tags, which stay
on it while a rebuild under the bare name moves the default tag, so
Sandbox.create("name:production") boots the old content; Template.get_tags
lists them, Template.remove_tags removes them; what is not a tag is
refused; another key sees none of it. E2B's read-only tag routes of the
SDK's generated API client (count, exists, groups, a tag's assignments)
answer from the same tags."""

import uuid

import pytest
from e2b import Sandbox, Template
from e2b.api.client.api.tags import (
    get_templates_template_id_tags_count,
    get_templates_template_id_tags_exists,
    get_templates_template_id_tags_groups,
    get_templates_template_id_tags_tag_assignments,
)
from e2b.api.client.api.templates import delete_templates_template_id
from e2b.api.client.models.get_templates_template_id_tags_groups_sort import GetTemplatesTemplateIDTagsGroupsSort
from e2b.api.client_sync import get_api_client
from e2b.connection_config import ConnectionConfig


def api(api_key=None):
    return get_api_client(ConnectionConfig(api_key=api_key))


def writes(text):
    return Template().from_base_image().run_cmd(f"echo {text} > /home/user/build.txt")


def content(ref, **kw):
    sb = Sandbox.create(ref, timeout=60, **kw)
    try:
        return sb.files.read("/home/user/build.txt")
    finally:
        sb.kill()


def test_tags_name_builds(other_key):
    name = "compat-tags-" + uuid.uuid4().hex[:8]
    first = Template.build(writes("first"), f"{name}:v1")
    try:
        info = Template.assign_tags(f"{name}:v1", ["production", "stable"])
        assert info.build_id == first.build_id and info.tags == ["production", "stable"]
        assert Template.assign_tags(f"{name}:v1", "single").tags == ["single"]
        for bad in [":invalid-tag", f"{name}:", "other:x"]:
            with pytest.raises(Exception):
                Template.assign_tags(f"{name}:v1", bad)

        second = Template.build(writes("second"), name)
        tags = {t.tag: t.build_id for t in Template.get_tags(first.template_id)}
        assert tags == {"v1": first.build_id, "production": first.build_id, "stable": first.build_id,
                        "single": first.build_id, "default": second.build_id}
        assert content(f"{name}:production") == "first\n"
        assert content(name) == "second\n"
        assert content(f"{name}:default") == "second\n"

        # Another key: no tags to read, assign, remove or boot.
        with pytest.raises(Exception):
            Template.get_tags(first.template_id, api_key=other_key)
        with pytest.raises(Exception):
            Template.assign_tags(f"{name}:v1", "theirs", api_key=other_key)
        with pytest.raises(Exception):
            Template.remove_tags(name, "production", api_key=other_key)
        with pytest.raises(Exception):
            Sandbox.create(f"{name}:production", api_key=other_key, timeout=30)

        Template.remove_tags(name, ["v1", "stable", "single"])
        assert {t.tag for t in Template.get_tags(first.template_id)} == {"production", "default"}
        with pytest.raises(Exception):
            Sandbox.create(f"{name}:v1", timeout=30)
        with pytest.raises(Exception):
            Template.remove_tags(name, "v1")
        assert content(f"{name}:production") == "first\n"
        Template.remove_tags(name, "production")
        assert [t.tag for t in Template.get_tags(first.template_id)] == ["default"]
    finally:
        assert delete_templates_template_id.sync_detailed(first.template_id, client=api()).status_code == 204
    with pytest.raises(Exception):
        Template.get_tags(first.template_id)


def test_tag_queries_of_the_generated_client(other_key):
    name = "compat-tagq-" + uuid.uuid4().hex[:8]
    built = Template.build(writes("tagged"), f"{name}:v1")
    client = api()
    tid = built.template_id
    try:
        Template.assign_tags(f"{name}:v1", ["production", "stable"])
        count = get_templates_template_id_tags_count.sync_detailed(tid, client=client)
        assert count.status_code == 200 and count.parsed.total == 3

        found = get_templates_template_id_tags_exists.sync_detailed(name, client=client, tag="production")
        assert found.status_code == 200 and found.parsed.exists and found.parsed.normalized_tag == "production"
        missing = get_templates_template_id_tags_exists.sync_detailed(tid, client=client, tag="nope")
        assert missing.status_code == 200 and not missing.parsed.exists

        page = get_templates_template_id_tags_groups.sync_detailed(
            tid, client=client, tags_limit=2, sort=GetTemplatesTemplateIDTagsGroupsSort.NAME_ASC)
        assert page.status_code == 200 and [g.tag for g in page.parsed.tags] == ["production", "stable"]
        assert page.parsed.next_cursor
        rest = get_templates_template_id_tags_groups.sync_detailed(
            tid, client=client, tags_limit=2, tags_cursor=page.parsed.next_cursor,
            sort=GetTemplatesTemplateIDTagsGroupsSort.NAME_ASC)
        assert [g.tag for g in rest.parsed.tags] == ["v1"] and rest.parsed.next_cursor is None
        for g in page.parsed.tags + rest.parsed.tags:
            assert len(g.assignments) == 1 and not g.has_more
            assert str(g.assignments[0].build_id) == built.build_id
            assert g.assignments[0].build_finished_at is not None
        searched = get_templates_template_id_tags_groups.sync_detailed(tid, client=client, search="stab")
        assert [g.tag for g in searched.parsed.tags] == ["stable"]

        history = get_templates_template_id_tags_tag_assignments.sync_detailed(tid, "stable", client=client)
        assert history.status_code == 200 and [str(a.build_id) for a in history.parsed.data] == [built.build_id]
        assert history.parsed.next_cursor is None

        # Bad parameters are a 400 that names them; another key finds no template.
        for bad in [
            get_templates_template_id_tags_exists.sync_detailed(tid, client=client, tag="a:b"),
            get_templates_template_id_tags_groups.sync_detailed(tid, client=client, tags_limit=0),
            get_templates_template_id_tags_groups.sync_detailed(tid, client=client, assignment_limit=99),
            get_templates_template_id_tags_groups.sync_detailed(tid, client=client, tags_cursor="nope"),
            get_templates_template_id_tags_tag_assignments.sync_detailed(tid, "v1", client=client, limit=1000),
        ]:
            assert bad.status_code == 400 and bad.parsed.message, bad
        theirs = api(other_key)
        for res in [
            get_templates_template_id_tags_count.sync_detailed(tid, client=theirs),
            get_templates_template_id_tags_exists.sync_detailed(name, client=theirs, tag="v1"),
            get_templates_template_id_tags_groups.sync_detailed(tid, client=theirs),
            get_templates_template_id_tags_tag_assignments.sync_detailed(tid, "v1", client=theirs),
        ]:
            assert res.status_code == 404, res
    finally:
        assert delete_templates_template_id.sync_detailed(tid, client=client).status_code == 204
