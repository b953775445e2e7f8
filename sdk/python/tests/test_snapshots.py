"""Snapshots and fork against the real server: sbx.snapshot,
Sandbox.create(snapshot=...), sbx.fork, client.snapshots, get_snapshot and
delete_snapshot, with the SDK's errors and another key's view."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from withruntime import (
    AsyncClient,
    AsyncSandbox,
    BadRequestError,
    Client,
    ConflictError,
    ForkResult,
    NotFoundError,
    Sandbox,
)

from .conftest import Server

# A process that keeps a count in memory and writes it to a file (replaced
# whole, so never read half-written): where it runs on in a copy, the count
# goes on from where it was at the snapshot.
COUNTER = """import os, time
open("/tmp/counter.pid", "w").write(str(os.getpid()))
n = 0
while True:
    n += 1
    open("/tmp/count.new", "w").write(str(n))
    os.replace("/tmp/count.new", "/tmp/count")
    time.sleep(0.1)
"""


def count(sbx: Sandbox) -> int:
    return int(sbx.exec("cat /tmp/count").stdout)


def start_counter(sbx: Sandbox) -> None:
    sbx.files.write_file("/workspace/counter.py", COUNTER)
    sbx.files.write_file("/workspace/note.txt", "before the snapshot")
    sbx.exec("nohup python3 /workspace/counter.py >/dev/null 2>&1 &")
    deadline = time.monotonic() + 10
    while sbx.exec("cat /tmp/count 2>/dev/null").stdout in ("", "1", "2"):
        assert time.monotonic() < deadline, "the counter did not start"
        time.sleep(0.1)


def counting_on(sbx: Sandbox, at_least: int) -> None:
    """The counter runs in sbx, from at least where it was."""
    first = count(sbx)
    assert first >= at_least, f"the count restarted in {sbx.id}: {first} < {at_least}"
    deadline = time.monotonic() + 10
    while count(sbx) <= first:
        assert time.monotonic() < deadline, f"the counter stopped in {sbx.id}"
        time.sleep(0.1)


def note(sbx: Sandbox) -> str:
    return sbx.files.read_file("/workspace/note.txt").decode()


def test_snapshot_starts_independent_sandboxes(server: Server, client: Client, sbx: Sandbox) -> None:
    start_counter(sbx)
    name = "py-sdk-" + uuid.uuid4().hex[:10]
    snap = sbx.snapshot(name)
    assert snap.id.startswith("snap_") and snap.name == name and snap.state == "ready" and snap.mode == "full"
    assert snap.source_sandbox_id == sbx.id and snap.bytes > 0 and snap.created_at is not None
    assert snap.template == "base" and snap.memory_mib == sbx.info.memory_mib  # type: ignore[union-attr]
    at_snapshot = count(sbx)

    with pytest.raises(ConflictError):
        sbx.snapshot(name)
    # Files alone: a fresh boot with the note, no counter, no /tmp.
    files = sbx.snapshot(mode="filesystem")
    assert files.mode == "filesystem" and files.bytes > 0
    with Sandbox.create(snapshot=files.id, timeout_seconds=120) as fresh:
        assert note(fresh) == "before the snapshot"
        assert fresh.exec("cat /tmp/count").exit_code != 0
        assert "counter.py" not in fresh.exec("ps -eo args").stdout
    client.delete_snapshot(files.id)

    with (
        Sandbox.create(snapshot=snap.id, timeout_seconds=120) as a,
        Sandbox.create(snapshot=name, timeout_seconds=120, env={"FROM_CREATE": "b"}) as b,
    ):
        for copy in (a, b):
            assert copy.id != sbx.id and copy.info is not None and copy.info.template == "base"
            assert note(copy) == "before the snapshot"
            counting_on(copy, at_snapshot)
        assert b.exec("echo $FROM_CREATE").stdout == "b\n"
        a.files.write_file("/workspace/note.txt", "changed in a")
        assert a.exec("kill $(cat /tmp/counter.pid)").exit_code == 0
        assert note(b) == note(sbx) == "before the snapshot"
        counting_on(b, at_snapshot)
        counting_on(sbx, at_snapshot)

        assert snap.id in [s.id for s in client.snapshots()]
        assert [s.id for s in sbx.snapshots()] == [snap.id]
        assert [s.id for s in client.snapshots(source_sandbox_id=sbx.id)] == [snap.id]
        assert a.snapshots() == []
        assert client.get_snapshot(name).id == snap.id

        # Another key sees none of it.
        key = client.create_key("py-sdk-snapshot-other", daily_limit_micros=10_000_000)
        with Client(server.url, key.secret) as other:
            assert other.snapshots() == []
            with pytest.raises(NotFoundError):
                other.get_snapshot(snap.id)
            with pytest.raises(NotFoundError):
                other.delete_snapshot(snap.id)
            with pytest.raises(NotFoundError):
                other.create(snapshot=snap.id, timeout_seconds=60)

        client.delete_snapshot(name)
        with pytest.raises(NotFoundError):
            client.get_snapshot(snap.id)
        with pytest.raises(NotFoundError):
            client.delete_snapshot(snap.id)
        with pytest.raises(NotFoundError):
            Sandbox.create(snapshot=snap.id, timeout_seconds=60)
        assert note(b) == "before the snapshot"  # what was made from it runs on


def test_fork_filesystem_boots_fresh_copies(client: Client, sbx: Sandbox) -> None:
    sbx.files.write_file("/workspace/files-fork.txt", "files")
    sbx.exec("(setsid sleep 3600 >/dev/null 2>&1 &)")
    res = sbx.fork(2, mode="filesystem", timeout_seconds=120)
    try:
        res.raise_for_errors()
        assert res.snapshot.mode == "filesystem" and len(res.made) == 2
        for f in res.made:
            assert f.exec("cat /workspace/files-fork.txt; pgrep -x sleep || echo none").stdout == "filesnone\n"
    finally:
        res.kill_all()


def test_fork_makes_running_copies(client: Client, sbx: Sandbox) -> None:
    start_counter(sbx)
    with pytest.raises(BadRequestError):
        sbx.fork(0)
    at_fork = count(sbx)
    res = sbx.fork(2, timeout_seconds=120, env={"N": "x"}, metadata={"fork": "yes"})
    try:
        assert isinstance(res, ForkResult)
        assert res.errors == [None, None] and len(res.made) == 2
        res.raise_for_errors()
        assert res.snapshot.id.startswith("snap_") and res.snapshot.source_sandbox_id == sbx.id
        assert not res.snapshot_kept
        assert len({f.id for f in res.made} | {sbx.id}) == 3
        for f in res.made:
            assert isinstance(f, Sandbox)
            assert f.info is not None and f.info.metadata == {"fork": "yes"} and f.info.state == "running"
            assert note(f) == "before the snapshot"
            assert f.exec("echo $N").stdout == "x\n"
            counting_on(f, at_fork)
        res.made[0].files.write_file("/workspace/note.txt", "changed in the first fork")
        assert note(res.made[1]) == note(sbx) == "before the snapshot"
        counting_on(sbx, at_fork)
        assert sbx.snapshots() == []  # a fork's snapshot is not kept
    finally:
        res.kill_all()
    kept = sbx.fork(1, keep_snapshot=True, name="py-sdk-kept-" + uuid.uuid4().hex[:8], timeout_seconds=60)
    try:
        assert kept.snapshot_kept and [s.id for s in sbx.snapshots()] == [kept.snapshot.id]
    finally:
        kept.kill_all()
        client.delete_snapshot(kept.snapshot.id)


def test_async_snapshot_and_fork(server: Server) -> None:
    async def main() -> None:
        async with AsyncClient() as c, AsyncSandbox.create(client=c, timeout_seconds=120) as src:
            await src.files.write_file("/workspace/f", "async source")
            snap = await src.snapshot()
            try:
                async with AsyncSandbox.create(snapshot=snap.id, client=c, timeout_seconds=60) as copy:
                    assert (await copy.files.read_file("/workspace/f")) == b"async source"
                assert snap.id in [s.id for s in await c.snapshots()]
            finally:
                await c.delete_snapshot(snap.id)
            res = await src.fork()
            try:
                assert len(res.made) == 1 and isinstance(res.made[0], AsyncSandbox)
                assert (await res.made[0].exec("cat /workspace/f")).stdout == "async source"
            finally:
                await res.kill_all()

    asyncio.run(main())
