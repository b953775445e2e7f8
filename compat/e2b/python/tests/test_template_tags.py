"""Template tags through the unmodified SDK: a build named "name:tag" gets
that tag; Template.assign_tags names its build with more tags, which stay
on it while a rebuild under the bare name moves the default tag, so
Sandbox.create("name:production") boots the old content; Template.get_tags
lists them, Template.remove_tags removes them; what is not a tag is
refused; another key sees none of it."""

import uuid

import pytest
from e2b import Sandbox, Template
from e2b.api.client.api.templates import delete_templates_template_id
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
