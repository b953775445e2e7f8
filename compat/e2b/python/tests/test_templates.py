"""Template.build through the unmodified SDK: a template from an image (a
small one that compat/e2b/run.sh serves from a registry on loopback, since
nothing else is reachable) with copy, set_envs and run_cmd steps, whose
sandboxes (Sandbox.create(<name>)) hold what the steps made; one key's
template is no other key's; a start command (set_start_cmd with a ready
check) is running at a sandbox's first command, in the steps' last
directory, environment and user; a step Runtime's builder lacks is refused
by name, and a failing step or start fails the build with its output;
Template.exists knows the server's own templates."""

import os
import uuid

import pytest
from e2b import Sandbox, Template, wait_for_file, wait_for_port
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


def test_start_command_is_running_at_the_first_command():
    # E2B's own example: a server started by the template, answering at the
    # sandbox's first command. It serves the last WORKDIR, and sees the
    # ENV steps' values, as E2B's start command does.
    name = new_name()
    template = (
        Template()
        .from_base_image()
        .set_envs({"SITE_NOTE": "from set_envs"})
        .run_cmd('mkdir -p /home/user/site && echo "$SITE_NOTE" > /home/user/site/index.html')
        .set_workdir("site")
        .set_start_cmd("python3 -m http.server 8000", wait_for_port(8000))
    )
    logs = []
    info = Template.build(template, name, on_build_logs=logs.append)
    assert any("starting the template" in entry.message for entry in logs), [e.message for e in logs]
    sb = Sandbox.create(name, timeout=120)
    try:
        r = sb.commands.run("curl -sS --max-time 5 http://127.0.0.1:8000/index.html; ps -eo user=,args= | grep '[h]ttp.server 8000' | tr -s ' '")
        assert r.stdout == "from set_envs\nuser python3 -m http.server 8000\n"
    finally:
        sb.kill()
        assert delete_templates_template_id.sync_detailed(info.template_id, client=api()).status_code == 204


def test_start_command_as_root_and_a_failing_start():
    # The steps end as root: the start command runs as root (E2B runs it
    # as the template's last user). A daemonising start that exits 0 is
    # fine; the ready check waits for what it left behind.
    name = new_name()
    template = (
        Template()
        .from_base_image()
        .set_user("root")
        .set_start_cmd("(sleep 1; id -un > /opt/started-by; exec sleep 100000) & exit 0", wait_for_file("/opt/started-by"))
    )
    info = Template.build(template, name)
    sb = Sandbox.create(name, timeout=120)
    try:
        r = sb.commands.run("cat /opt/started-by; pgrep -u root -x sleep >/dev/null && echo still-running")
        assert r.stdout == "root\nstill-running\n"
    finally:
        sb.kill()
        assert delete_templates_template_id.sync_detailed(info.template_id, client=api()).status_code == 204

    # A start command that fails before its ready check passes fails the
    # build, saying why (the name stays registered, as E2B's does, with no
    # build to boot).
    failing = Template().from_base_image().set_start_cmd("echo no-server-today >&2; exit 4", wait_for_port(8001))
    name = new_name()
    with pytest.raises(Exception) as failed:
        Template.build(failing, name)
    assert "exited 4" in str(failed.value) and "no-server-today" in str(failed.value)
    with pytest.raises(Exception):
        Sandbox.create(name, timeout=30)


def test_unsupported_and_failing_steps():
    # A name Runtime cannot take: refused with the rule.
    with pytest.raises(Exception) as refused:
        Template.build(Template().from_template("base"), "Not A Name")
    assert "give 1-50 characters of a-z" in str(refused.value)

    # A failing step fails the build with its exit code and output.
    failing = Template().from_template("base").run_cmd("echo fine").run_cmd("echo broken-step >&2; exit 3")
    with pytest.raises(Exception) as failed:
        Template.build(failing, new_name())
    assert "exit code 3" in str(failed.value) and "broken-step" in str(failed.value)


def test_exists_knows_the_servers_templates():
    # Template.exists asks for an alias: Runtime's own templates the key may
    # use are there under their names and E2B's ("base",
    # "code-interpreter-v1"), as E2B's public templates are.
    assert Template.exists("base")
    assert Template.exists("code-interpreter-v1")
    assert not Template.exists(new_name())
