"""Template.build through the unmodified SDK: a template from an image (a
small one that compat/e2b/run.sh serves from a registry on loopback, since
nothing else is reachable) with copy, set_envs and run_cmd steps, whose
sandboxes (Sandbox.create(<name>)) hold what the steps made; one key's
template is no other key's; a step Runtime's builder lacks is refused by
name, and a failing step fails the build with its output."""

import os
import uuid

import pytest
from e2b import Sandbox, Template
from e2b.api.client.api.templates import delete_templates_template_id, get_templates
from e2b.api.client_sync import get_api_client
from e2b.connection_config import ConnectionConfig

IMAGE = os.environ.get("COMPAT_IMAGE")
needs_image = pytest.mark.skipif(
    not IMAGE, reason="COMPAT_IMAGE is not set: compat/e2b/run.sh serves the image (compat/e2b/imagereg needs Go)"
)


def api(api_key=None):
    """E2B's generated API client, as the SDK makes it."""
    return get_api_client(ConnectionConfig(api_key=api_key))


def new_name():
    return "compat-py-" + uuid.uuid4().hex[:10]


@needs_image
def test_build_from_image_with_copy_and_run(tmp_path, other_key):
    (tmp_path / "hello.txt").write_text("hello from the build context\n")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "greet.sh").write_text('#!/bin/sh\necho "greetings from $(id -un)"\n')
    name = new_name()
    template = (
        Template(file_context_path=str(tmp_path))
        .from_image(IMAGE)
        .copy("hello.txt", "/home/user/")
        .copy("tools", "/opt/tools", mode=0o755)
        .set_envs({"BUILD_NOTE": "seen by the build; $HOME stays as written"})
        .run_cmd('echo "$BUILD_NOTE" > /home/user/run.txt')
        .run_cmd("id -un > /opt/who.txt", user="root")
    )
    logs = []
    info = Template.build(template, name, on_build_logs=logs.append)
    assert info.template_id and info.build_id and info.name == name
    assert any("RUN id -un > /opt/who.txt" in entry.message for entry in logs), [e.message for e in logs]

    sb = Sandbox.create(name, timeout=120)
    try:
        assert sb.files.read("/home/user/hello.txt") == "hello from the build context\n"
        r = sb.commands.run('cat run.txt /opt/who.txt && /opt/tools/greet.sh && echo "$COMPAT_IMAGE ${BUILD_NOTE:-unset}"')
        # COMPAT_IMAGE is the image's own environment; BUILD_NOTE was the build's only.
        assert r.stdout == "seen by the build; $HOME stays as written\nroot\ngreetings from user\nsmall unset\n"
    finally:
        sb.kill()

    # The template is its key's: another key neither finds, lists, boots
    # nor deletes it.
    assert Template.exists(name)
    assert not Template.exists(name, api_key=other_key)
    with pytest.raises(Exception) as refused:
        Sandbox.create(name, api_key=other_key, timeout=30)
    assert "not found" in str(refused.value)
    mine = get_templates.sync_detailed(client=api()).parsed
    assert [t.aliases for t in mine if t.template_id == info.template_id] == [[name]]
    theirs = get_templates.sync_detailed(client=api(other_key)).parsed
    assert info.template_id not in [t.template_id for t in theirs]
    assert delete_templates_template_id.sync_detailed(info.template_id, client=api(other_key)).status_code == 404
    assert delete_templates_template_id.sync_detailed(info.template_id, client=api()).status_code == 204
    assert not Template.exists(name)


def test_unsupported_and_failing_steps():
    # set_start_cmd: refused by name before anything runs.
    start = Template().from_template("base").run_cmd("true").set_start_cmd("sleep 100", "true")
    with pytest.raises(Exception) as refused:
        Template.build(start, new_name())
    assert "startCmd and readyCmd (set_start_cmd, set_ready_cmd) are not supported" in str(refused.value)

    # A name Runtime cannot take: refused with the rule.
    with pytest.raises(Exception) as refused:
        Template.build(Template().from_template("base"), "Not A Name")
    assert "give 1-50 characters of a-z" in str(refused.value)

    # A failing step fails the build with its exit code and output.
    failing = Template().from_template("base").run_cmd("echo fine").run_cmd("echo broken-step >&2; exit 3")
    with pytest.raises(Exception) as failed:
        Template.build(failing, new_name())
    assert "exit code 3" in str(failed.value) and "broken-step" in str(failed.value)
