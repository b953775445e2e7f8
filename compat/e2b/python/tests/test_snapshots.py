"""Snapshots and fork through the unmodified SDK: create_snapshot,
Sandbox.create(<snapshot id>), list_snapshots, delete_snapshot and fork."""

import time
import uuid

import pytest
from e2b import Sandbox
from e2b.exceptions import SandboxException, SandboxNotFoundException

# A process that keeps a count in memory and writes it to a file: where it
# runs on in a copy, the file keeps growing past the count it had when the
# snapshot was taken (a process started afresh would count from 1). The
# file is replaced whole, so a read never finds it empty.
COUNTER = (
    "python3 -c 'import os, time\nn = 0\nwhile True:\n    n += 1\n"
    "    open(\"/tmp/count.new\", \"w\").write(str(n))\n    os.replace(\"/tmp/count.new\", \"/tmp/count\")\n    time.sleep(0.1)'"
)


def count(sb):
    return int(sb.files.read("/tmp/count"))


def counting_on(sb, pid, at_least):
    """The counter of pid runs in sb, from where it was (at_least)."""
    assert pid in [p.pid for p in sb.commands.list()]
    first = count(sb)
    assert first >= at_least
    deadline = time.time() + 10
    while count(sb) <= first:
        assert time.time() < deadline, "the counter stopped"
        time.sleep(0.1)


def source_with_state():
    sb = Sandbox.create(timeout=300, metadata={"case": "snapshot-source"})
    sb.files.write("/home/user/note.txt", "before the snapshot")
    proc = sb.commands.run(COUNTER, background=True)
    deadline = time.time() + 30
    # 20 counts (2 s): a copy whose process started afresh would be far below.
    while not sb.files.exists("/tmp/count") or count(sb) < 20:
        assert time.time() < deadline, "the counter did not start"
        time.sleep(0.1)
    return sb, proc.pid


def test_snapshot_starts_independent_sandboxes(other_key):
    sb, pid = source_with_state()
    made = []
    try:
        name = "compat-py-" + uuid.uuid4().hex[:12]
        # Read before the snapshot: the source counts on while it is taken,
        # so a read after it may be past the count the copies start from.
        at_snapshot = count(sb)
        snap = sb.create_snapshot(name=name)
        assert snap.snapshot_id.startswith("snap_")
        assert snap.names == [name]

        a = Sandbox.create(snap.snapshot_id, timeout=120)
        made.append(a)
        b = Sandbox.create(name, timeout=120)  # by its name, as E2B allows
        made.append(b)
        for copy in (a, b):
            assert copy.sandbox_id != sb.sandbox_id
            assert copy.files.read("/home/user/note.txt") == "before the snapshot"
            counting_on(copy, pid, at_snapshot)
        assert a.get_info().template_id == snap.snapshot_id

        # Each is its own sandbox: a write or a kill in one is not seen in
        # the others, nor in the source, which ran on throughout.
        a.files.write("/home/user/note.txt", "changed in a")
        assert a.commands.kill(pid) is True
        assert b.files.read("/home/user/note.txt") == "before the snapshot"
        assert sb.files.read("/home/user/note.txt") == "before the snapshot"
        counting_on(b, pid, at_snapshot)
        counting_on(sb, pid, at_snapshot)
        assert sb.get_info().metadata == {"case": "snapshot-source"}

        ids = [s.snapshot_id for s in Sandbox.list_snapshots().next_items()]
        assert snap.snapshot_id in ids
        assert [s.snapshot_id for s in sb.list_snapshots().next_items()] == [snap.snapshot_id]
        assert [s.snapshot_id for s in Sandbox.list_snapshots(name=name).next_items()] == [snap.snapshot_id]
        assert a.list_snapshots().next_items() == []

        # Another key's snapshot is not found, whatever is asked of it.
        assert snap.snapshot_id not in [s.snapshot_id for s in Sandbox.list_snapshots(api_key=other_key).next_items()]
        assert Sandbox.delete_snapshot(snap.snapshot_id, api_key=other_key) is False
        with pytest.raises(SandboxException) as e:
            Sandbox.create(snap.snapshot_id, timeout=60, api_key=other_key)
        assert e.value.status_code == 404

        assert Sandbox.delete_snapshot(snap.snapshot_id) is True
        assert Sandbox.delete_snapshot(snap.snapshot_id) is False
        assert snap.snapshot_id not in [s.snapshot_id for s in Sandbox.list_snapshots().next_items()]
        with pytest.raises(SandboxException) as e:
            Sandbox.create(snap.snapshot_id, timeout=60)
        assert e.value.status_code == 404
        # What was made from it runs on.
        assert b.commands.run("cat /home/user/note.txt").stdout == "before the snapshot"
    finally:
        for s in made:
            s.kill()
        sb.kill()


def test_fork_makes_independent_copies(other_key):
    sb, pid = source_with_state()
    forks = []
    try:
        with pytest.raises(SandboxNotFoundException):
            Sandbox.fork(sb.sandbox_id, count=1, api_key=other_key)
        at_fork = count(sb)
        forks = sb.fork(count=2, timeout=120)
        assert len(forks) == 2
        assert all(isinstance(f, Sandbox) for f in forks), forks
        assert len({f.sandbox_id for f in forks} | {sb.sandbox_id}) == 3
        for f in forks:
            assert f.files.read("/home/user/note.txt") == "before the snapshot"
            counting_on(f, pid, at_fork)
            info = f.get_info()
            assert info.template_id == "base"
            assert info.metadata == {"case": "snapshot-source"}
            assert 100 <= (info.end_at - info.started_at).total_seconds() <= 121
        forks[0].files.write("/home/user/note.txt", "changed in the first fork")
        assert forks[1].files.read("/home/user/note.txt") == "before the snapshot"
        assert sb.files.read("/home/user/note.txt") == "before the snapshot"
        counting_on(sb, pid, at_fork)
        # A fork's snapshot is not kept.
        assert sb.list_snapshots().next_items() == []
    finally:
        for f in forks:
            if isinstance(f, Sandbox):
                f.kill()
        sb.kill()


def test_filesystem_only_snapshot_boots_fresh_with_the_files(sandbox):
    sandbox.files.write("/home/user/note.txt", "files only")
    sandbox.commands.run("sleep 600", background=True)
    snap = sandbox.create_snapshot(mode="filesystem")
    try:
        fresh = Sandbox.create(snap.snapshot_id, timeout=120)
        try:
            assert fresh.files.read("/home/user/note.txt") == "files only"
            assert "sleep 600" not in fresh.commands.run("ps -eo args").stdout
        finally:
            fresh.kill()
    finally:
        Sandbox.delete_snapshot(snap.snapshot_id)
