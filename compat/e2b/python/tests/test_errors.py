"""Bad input: each answered in E2B's shape, raised by the SDK as its own
exception."""

import os

import httpx
import pytest
from e2b import Sandbox
from e2b.exceptions import (
    AuthenticationException,
    SandboxException,
    SandboxNotFoundException,
)

SANDBOX_URL = os.environ.get("E2B_SANDBOX_URL", "")


def test_unknown_template():
    with pytest.raises(SandboxException) as e:
        Sandbox.create(template="no-such-template")
    assert "no-such-template" in str(e.value)


def test_wrong_key():
    with pytest.raises(AuthenticationException):
        Sandbox.create(api_key="wr_not_a_real_key")
    with pytest.raises(AuthenticationException):
        Sandbox.list(api_key="wr_not_a_real_key").next_items()


def test_another_tenants_sandbox(sandbox, other_key):
    with pytest.raises(SandboxNotFoundException):
        Sandbox.get_info(sandbox.sandbox_id, api_key=other_key)
    with pytest.raises(SandboxNotFoundException):
        Sandbox.connect(sandbox.sandbox_id, api_key=other_key)
    assert Sandbox.kill(sandbox.sandbox_id, api_key=other_key) is False
    assert sandbox.sandbox_id not in [s.sandbox_id for s in Sandbox.list(api_key=other_key).next_items()]
    assert sandbox.is_running()


def envd(path, sandbox_id, token, body=b"{}"):
    headers = {"Content-Type": "application/json", "E2b-Sandbox-Id": sandbox_id, "E2b-Sandbox-Port": "49983"}
    if token is not None:
        headers["X-Access-Token"] = token
    return httpx.post(SANDBOX_URL + path, content=body, headers=headers)


def test_data_plane_tokens(sandbox, other_key):
    other = Sandbox.create(api_key=other_key, timeout=60)
    try:
        stat = "/filesystem.Filesystem/Stat"
        body = b'{"path": "/etc/hostname"}'
        assert envd(stat, sandbox.sandbox_id, sandbox._envd_access_token, body).status_code == 200
        # No token, a made-up one, and another tenant's sandbox's token.
        for token in (None, "wre2b_made_up", other._envd_access_token):
            r = envd(stat, sandbox.sandbox_id, token, body)
            assert r.status_code == 401, (token, r.text)
            assert r.json()["code"] == 401
    finally:
        other.kill()


def test_unknown_rpc():
    r = envd("/process.Process/NoSuchThing", "x", None)
    assert r.status_code == 401  # the token is checked first


def test_unknown_rpc_with_a_token(sandbox):
    r = envd("/process.Process/NoSuchThing", sandbox.sandbox_id, sandbox._envd_access_token)
    assert r.status_code == 501 and r.json()["code"] == "unimplemented"


def test_killed_sandbox_is_not_running():
    from e2b.exceptions import SandboxNotRunningException

    sb = Sandbox.create(timeout=60)
    sb.kill()
    with pytest.raises(SandboxNotRunningException):
        sb.commands.run("true")
    assert sb.is_running() is False


def test_ranged_download(sandbox):
    """GET /files honours a Range as envd does: 206 with Content-Range, 416
    with bytes */SIZE past the end."""
    sandbox.files.write("/tmp/r.bin", bytes(range(256)) * 4)
    url = SANDBOX_URL + "/files?path=/tmp/r.bin"
    headers = {"X-Access-Token": sandbox._envd_access_token, "E2b-Sandbox-Id": sandbox.sandbox_id, "E2b-Sandbox-Port": "49983"}
    r = httpx.get(url, headers={**headers, "Range": "bytes=10-19"})
    assert r.status_code == 206 and r.content == bytes(range(10, 20)) and r.headers["Content-Range"] == "bytes 10-19/1024"
    r = httpx.get(url, headers={**headers, "Range": "bytes=1024-"})
    assert r.status_code == 416 and r.headers["Content-Range"] == "bytes */1024"
