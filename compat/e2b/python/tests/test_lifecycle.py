"""Sandbox lifecycle through the control plane."""

import time
import uuid

import pytest
from e2b import Sandbox, SandboxQuery, SandboxState
from e2b.exceptions import SandboxNotFoundException


def test_create_info_timeout_kill():
    sb = Sandbox.create(timeout=120, metadata={"case": "lifecycle"})
    try:
        assert sb.is_running()
        info = sb.get_info()
        assert info.sandbox_id == sb.sandbox_id
        assert info.template_id == "base"
        assert info.state == SandboxState.RUNNING
        assert info.metadata == {"case": "lifecycle"}
        assert info.cpu_count >= 1 and info.memory_mb > 0
        assert 100 <= (info.end_at - info.started_at).total_seconds() <= 121
        sb.set_timeout(600)
        info = sb.get_info()
        assert (info.end_at - info.started_at).total_seconds() > 500
    finally:
        assert sb.kill() is True
    assert sb.kill() is False
    assert Sandbox.kill(sb.sandbox_id) is False
    with pytest.raises(SandboxNotFoundException):
        Sandbox.get_info(sb.sandbox_id)


def test_connect_gives_a_working_second_handle():
    sb = Sandbox.create(timeout=120)
    try:
        sb.files.write("/tmp/shared.txt", "from the first handle")
        again = Sandbox.connect(sb.sandbox_id)
        assert again.sandbox_id == sb.sandbox_id
        assert again.files.read("/tmp/shared.txt") == "from the first handle"
        # The first handle's access token still works after the connect.
        assert sb.commands.run("cat /tmp/shared.txt").stdout == "from the first handle"
    finally:
        sb.kill()


def test_list_filters_and_pages():
    tag = uuid.uuid4().hex
    made = [Sandbox.create(timeout=120, metadata={"page": tag}) for _ in range(3)]
    try:
        ids = {s.sandbox_id for s in made}
        paginator = Sandbox.list(query=SandboxQuery(metadata={"page": tag}), limit=2)
        first = paginator.next_items()
        assert len(first) == 2 and paginator.has_next
        second = paginator.next_items()
        assert len(second) == 1 and not paginator.has_next
        assert {s.sandbox_id for s in first + second} == ids
        assert all(s.metadata == {"page": tag} for s in first + second)
        running = Sandbox.list(query=SandboxQuery(metadata={"page": tag}, state=[SandboxState.PAUSED])).next_items()
        assert running == []
    finally:
        for s in made:
            s.kill()


def test_pause_and_resume_keep_memory_and_files():
    sb = Sandbox.create(timeout=120)
    try:
        sb.files.write("/home/user/kept.txt", "on disk")
        proc = sb.commands.run("python3 -c 'import time; x=42; time.sleep(3600)'", background=True)
        assert sb.pause() is True
        assert Sandbox.get_info(sb.sandbox_id).state == SandboxState.PAUSED
        assert sb.pause() is False  # already paused: 409
        assert sb.is_running() is False  # envd's health is 502 while paused
        resumed = Sandbox.connect(sb.sandbox_id, timeout=120)
        assert Sandbox.get_info(sb.sandbox_id).state == SandboxState.RUNNING
        assert resumed.is_running() is True
        assert resumed.files.read("/home/user/kept.txt") == "on disk"
        assert proc.pid in [p.pid for p in resumed.commands.list()]
    finally:
        sb.kill()


def test_filesystem_pause_keeps_files_not_processes():
    # pause(mode="filesystem") (keep_memory=False) keeps the files alone:
    # the resume boots the sandbox fresh, its background process gone.
    sb = Sandbox.create(timeout=120)
    try:
        sb.files.write("/home/user/kept.txt", "on disk")
        proc = sb.commands.run("sleep 3600", background=True)
        boot_before = sb.files.read("/proc/sys/kernel/random/boot_id").strip()
        assert sb.pause(mode="filesystem") is True
        assert Sandbox.get_info(sb.sandbox_id).state == SandboxState.PAUSED
        assert sb.is_running() is False
        resumed = Sandbox.connect(sb.sandbox_id, timeout=120)
        assert Sandbox.get_info(sb.sandbox_id).state == SandboxState.RUNNING
        assert resumed.files.read("/home/user/kept.txt") == "on disk"
        assert proc.pid not in [p.pid for p in resumed.commands.list()]
        assert resumed.commands.run("pgrep -x sleep || echo none").stdout.strip() == "none"
        # A fresh boot: a new kernel boot id.
        assert resumed.files.read("/proc/sys/kernel/random/boot_id").strip() != boot_before
        # The deprecated spelling does the same.
        resumed.files.write("/home/user/second.txt", "again")
        assert resumed.pause(keep_memory=False) is True
        back = Sandbox.connect(sb.sandbox_id, timeout=120)
        assert back.files.read("/home/user/second.txt") == "again"
    finally:
        Sandbox.kill(sb.sandbox_id)


def test_auto_pause_filesystem_at_timeout_and_reboot():
    # on_timeout {action: pause, mode: filesystem} (autoPauseMemory false):
    # the timeout pauses with the files alone.
    sb = Sandbox.create(timeout=3, lifecycle={"on_timeout": {"action": "pause", "mode": "filesystem"}})
    try:
        sb.files.write("/home/user/state", "before")
        sb.commands.run("sleep 3600", background=True)
        deadline = time.time() + 30
        while Sandbox.get_info(sb.sandbox_id).state != SandboxState.PAUSED:
            assert time.time() < deadline, "the sandbox was not paused at its timeout"
            time.sleep(0.5)
        back = Sandbox.connect(sb.sandbox_id, timeout=60)
        assert back.files.read("/home/user/state") == "before"
        assert back.commands.run("pgrep -x sleep || echo none").stdout.strip() == "none"
    finally:
        Sandbox.kill(sb.sandbox_id)
    # connect(on_resume="reboot") (memory false) of a sandbox paused whole
    # brings it back booted fresh with its files.
    full = Sandbox.create(timeout=120)
    try:
        full.files.write("/home/user/kept.txt", "kept")
        full.commands.run("sleep 3600", background=True)
        assert full.pause() is True
        back = Sandbox.connect(full.sandbox_id, timeout=60, on_resume="reboot")
        assert back.files.read("/home/user/kept.txt") == "kept"
        assert back.commands.run("pgrep -x sleep || echo none").stdout.strip() == "none"
    finally:
        Sandbox.kill(full.sandbox_id)


def test_auto_pause_at_timeout_then_connect_resumes():
    sb = Sandbox.create(timeout=2, lifecycle={"on_timeout": "pause"})
    try:
        sb.files.write("/tmp/state", "before")
        deadline = time.time() + 20
        while Sandbox.get_info(sb.sandbox_id).state != SandboxState.PAUSED:
            assert time.time() < deadline, "the sandbox was not paused at its timeout"
            time.sleep(0.5)
        info = Sandbox.get_info(sb.sandbox_id)
        assert info.lifecycle["on_timeout"] == "pause"
        back = Sandbox.connect(sb.sandbox_id, timeout=60)
        assert back.files.read("/tmp/state") == "before"
    finally:
        Sandbox.kill(sb.sandbox_id)


def test_network_maps_to_the_policy():
    sb = Sandbox.create(timeout=60, allow_internet_access=False)
    try:
        assert sb.get_info().allow_internet_access is False
        sb.update_network({"allow_out": ["example.com"], "deny_out": ["0.0.0.0/0"]})
        info = sb.get_info()
        assert info.allow_internet_access is False
        assert info.network["allow_out"] == ["example.com"]
        sb.update_network({})
        assert sb.get_info().allow_internet_access is True
    finally:
        sb.kill()


def test_set_timeout_zero_ends_the_lease_now():
    # E2B's set_timeout(0) ends the lease at once: with on_timeout pause
    # the sandbox pauses, is_running() turns false, and connect resumes it.
    sb = Sandbox.create(timeout=120, lifecycle={"on_timeout": "pause"})
    try:
        sb.files.write("/tmp/state", "kept")
        sb.set_timeout(0)
        deadline = time.time() + 30
        while sb.is_running():
            assert time.time() < deadline, "set_timeout(0) did not end the lease"
            time.sleep(0.2)
        assert Sandbox.get_info(sb.sandbox_id).state == SandboxState.PAUSED
        back = Sandbox.connect(sb.sandbox_id, timeout=60)
        assert back.files.read("/tmp/state") == "kept"
    finally:
        Sandbox.kill(sb.sandbox_id)


def test_get_metrics(sandbox):
    """get_metrics answers the host's samples of the sandbox: CPU, memory
    and disk against the sandbox's sizes, within the window asked for."""
    import datetime

    info = sandbox.get_info()
    sandbox.commands.run("head -c 8000000 /dev/urandom > /tmp/metrics.bin")
    metrics = sandbox.get_metrics()
    assert metrics, "no metrics for a running sandbox"
    m = metrics[-1]
    assert m.cpu_count == info.cpu_count
    assert 0 <= m.cpu_used_pct <= 100
    assert m.mem_total == info.memory_mb * 1024 * 1024
    assert 0 < m.mem_used
    assert m.disk_total > 0
    assert 0 <= m.disk_used <= m.disk_total
    now = datetime.datetime.now(datetime.timezone.utc)
    assert abs((m.timestamp - now).total_seconds()) < 30
    assert all(a.timestamp <= b.timestamp for a, b in zip(metrics, metrics[1:]))
    # By the class too, and in a window: one before the sandbox has none.
    assert Sandbox.get_metrics(sandbox.sandbox_id)
    hour = datetime.timedelta(hours=1)
    assert sandbox.get_metrics(start=info.started_at - 2 * hour, end=info.started_at - hour) == []
    recent = sandbox.get_metrics(start=now - datetime.timedelta(seconds=20), end=now + datetime.timedelta(seconds=5))
    assert recent and all(r.timestamp >= now - datetime.timedelta(seconds=21) for r in recent)


def test_mcp_without_a_gateway_fails_and_leaves_no_sandbox():
    """The SDK starts the MCP gateway itself after the create; the base
    template has no gateway binary, so the create fails as E2B's does and
    the SDK kills the sandbox: none is left running."""
    from e2b.exceptions import SandboxException

    metadata = {"case": "mcp-" + uuid.uuid4().hex[:12]}
    query = SandboxQuery(state=[SandboxState.RUNNING], metadata=metadata)
    with pytest.raises(SandboxException, match="Failed to start MCP gateway"):
        Sandbox.create("base", timeout=60, metadata=metadata, mcp={"some_server": {}})
    assert Sandbox.list(query=query).next_items() == []
