"""Volumes against the real server: create, list, get and delete; the files
of a volume without a sandbox (upload, download, list); mounts on create,
read-write and read-only, shared between sandboxes and outliving them; the
SDK's errors and another key's view."""

from __future__ import annotations

import asyncio
import io
import uuid
from collections.abc import Iterator

import pytest

from withruntime import (
    AsyncClient,
    AsyncSandbox,
    BadRequestError,
    Client,
    ConflictError,
    NotFoundError,
    RangeNotSatisfiableError,
    Sandbox,
    VolumeInfo,
    VolumeMount,
)
from withruntime.volumes import mounts_body

from .conftest import Server


def vol_name() -> str:
    return "py-" + uuid.uuid4().hex[:12]


@pytest.fixture
def volume(client: Client) -> Iterator[VolumeInfo]:
    """A fresh 32 MiB volume of the test key, deleted after the test."""
    v = client.create_volume(vol_name(), 32)
    try:
        yield v
    finally:
        try:
            client.delete_volume(v.name)
        except NotFoundError:
            pass


def test_create_list_get_delete(client: Client) -> None:
    name = vol_name()
    v = client.create_volume(name, 32)
    try:
        assert v.name == name and v.id.startswith("vol_") and v.size_mib == 32 and v.state == "ready"
        assert 0 < v.capacity_bytes <= 32 << 20 and v.used_bytes >= 0 and v.mounted_by == []
        assert v.created_at is not None and v.to_dict()["sizeMiB"] == 32
        with pytest.raises(ConflictError):
            client.create_volume(name, 32)
        with pytest.raises(BadRequestError):
            client.create_volume("-bad name-", 32)
        with pytest.raises(TypeError):
            client.create_volume(vol_name(), "32")  # type: ignore[arg-type]
        assert name in [x.name for x in client.volumes()]
        assert client.get_volume(name).id == v.id
    finally:
        client.delete_volume(name)
    with pytest.raises(NotFoundError):
        client.get_volume(name)
    with pytest.raises(NotFoundError):
        client.delete_volume(name)
    assert name not in [x.name for x in client.volumes()]


def test_files_without_a_sandbox(client: Client, volume: VolumeInfo) -> None:
    files = client.volume_files(volume.name)
    info = files.write("/data/a.txt", b"hello volume")
    assert info.path == "/data/a.txt" and info.size == 12 and info.type == "file"
    files.write_text("b.txt", "relative to the root")
    files.write("/data/stream.bin", io.BytesIO(b"x" * 300_000))
    assert files.read_file("/data/a.txt") == b"hello volume"
    assert files.read_text("/b.txt") == "relative to the root"
    assert files.read_file("/data/a.txt", offset=6) == b"volume"
    assert files.read_file("/data/a.txt", offset=0, length=5) == b"hello"
    out = io.BytesIO()
    assert files.read("/data/stream.bin", out) == 300_000 and out.getvalue() == b"x" * 300_000
    with files.open("/data/a.txt") as f:
        assert f.size == 12 and f.read() == b"hello volume"
    root = {e.name: e for e in files.list()}
    assert set(root) >= {"data", "b.txt"} and root["data"].is_dir and root["b.txt"].path == "/b.txt"
    assert [e.name for e in files.list("/data")] == ["a.txt", "stream.bin"]
    assert [e.name for e in files.entries("data")] == ["a.txt", "stream.bin"]
    page = files.list_page("/data", limit=1)
    assert [e.name for e in page.entries] == ["a.txt"] and page.truncated and page.next
    page2 = files.list_page("/data", limit=1, cursor=page.next)
    assert [e.name for e in page2.entries] == ["stream.bin"] and not page2.truncated
    assert client.get_volume(volume.name).used_bytes >= 300_000

    with pytest.raises(NotFoundError):
        files.read_file("/nope.txt")
    with pytest.raises(BadRequestError):
        files.read_file("/data")  # a directory
    with pytest.raises(RangeNotSatisfiableError):
        files.read_file("/data/a.txt", offset=100)
    with pytest.raises(NotFoundError):
        client.volume_files(vol_name()).read_file("/a.txt")


def test_mounts_shared_and_outliving_sandboxes(client: Client, volume: VolumeInfo) -> None:
    writer = Sandbox.create(client=client, volumes=[VolumeMount(volume.name, "/data")])
    try:
        assert writer.info is not None and writer.info.volumes == [VolumeMount(volume.name, "/data", False)]
        res = writer.exec("echo from-a > /data/note && id -u && stat -c %u /data")
        assert res.exit_code == 0 and res.stdout.split() == ["1000", "1000"], res
        # Read-only, as a dict in the wire's spelling: sees the writer's file, may not write.
        reader = Sandbox.create(client=client, volumes=[{"name": volume.name, "path": "/mnt", "readOnly": True}])
        try:
            assert reader.exec("cat /mnt/note").stdout == "from-a\n"
            res = reader.exec("echo x > /mnt/other")
            assert res.exit_code != 0 and "Read-only file system" in res.stderr, res
            # The API's copy is seen at once by both.
            client.volume_files(volume.name).write_text("/from-api", "api")
            assert reader.exec("cat /mnt/from-api").stdout == "api"
            assert set(client.get_volume(volume.name).mounted_by) == {writer.id, reader.id}
            with pytest.raises(ConflictError) as exc:
                client.delete_volume(volume.name)
            assert writer.id in str(exc.value)
        finally:
            reader.kill()
    finally:
        writer.kill()
    # The files outlive both sandboxes, for a third one and the API.
    with Sandbox.create(client=client, volumes=[VolumeMount(volume.name, "/srv", read_only=True)]) as third:
        assert third.exec("cat /srv/note").stdout == "from-a\n"
    assert client.volume_files(volume.name).read_text("/note") == "from-a\n"


def test_another_key_sees_no_volume(server: Server, client: Client, volume: VolumeInfo) -> None:
    tenant = client.create_key("py-volume-tenant", daily_limit_micros=1_000_000)
    try:
        with Client(server.url, tenant.secret) as other:
            assert volume.name not in [v.name for v in other.volumes()]
            with pytest.raises(NotFoundError):
                other.get_volume(volume.name)
            with pytest.raises(NotFoundError):
                other.volume_files(volume.name).list()
            with pytest.raises(NotFoundError):
                other.delete_volume(volume.name)
            with pytest.raises(NotFoundError):
                Sandbox.create(client=other, volumes=[VolumeMount(volume.name, "/data")])
    finally:
        client.revoke_key(tenant.id)
    assert client.get_volume(volume.name).state == "ready"


def test_mount_arguments() -> None:
    assert mounts_body([VolumeMount("a", "/a"), {"name": "b", "path": "/b", "read_only": True}]) == [
        {"name": "a", "path": "/a"},
        {"name": "b", "path": "/b", "readOnly": True},
    ]
    for bad in ("a:/a", {"name": "a", "path": "/a"}, VolumeMount("a", "/a"), [("a", "/a")], [{"name": "a"}]):
        with pytest.raises(TypeError):
            mounts_body(bad)  # type: ignore[arg-type]


def test_async_volumes(server: Server) -> None:
    async def main() -> None:
        async with AsyncClient(server.url, server.key) as c:
            name = vol_name()
            v = await c.create_volume(name, 32)
            try:
                files = c.volume_files(name)
                await files.write("/x/y.txt", b"async")
                assert await files.read_file("/x/y.txt") == b"async"
                assert [e.name async for e in files.entries("/x")] == ["y.txt"]
                assert [x.id for x in await c.volumes() if x.name == name] == [v.id]
                async with AsyncSandbox.create(client=c, volumes=[VolumeMount(name, "/data")]) as sbx:
                    assert (await sbx.exec("cat /data/x/y.txt")).stdout == "async"
            finally:
                await c.delete_volume(name)

    asyncio.run(main())
