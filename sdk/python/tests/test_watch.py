"""File watches against the real server: sbx.files.watch as an iterator of
typed events (create, write, remove, rename with both names, chmod), in the
kernel's order, stopped by close (from another thread too) or a with
block; its errors; the async twin; the overflow event's parsing."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from withruntime import (
    AsyncSandbox,
    BadRequestError,
    FileWatch,
    NotFoundError,
    Sandbox,
    WatchEvent,
)
from withruntime.watch import event_from_line

from .conftest import Server


def take(w: FileWatch, n: int) -> list[WatchEvent]:
    out: list[WatchEvent] = []
    for ev in w:
        out.append(ev)
        if len(out) == n:
            break
    return out


def test_watch_reports_each_change_in_order(sbx: Sandbox) -> None:
    sbx.files.mkdir("/workspace/w")
    with sbx.files.watch("w", recursive=True) as w:
        assert w.path == "/workspace/w" and not w.closed
        res = sbx.exec(
            'cd /workspace/w && python3 -c \'import os; open("blink", "w").close(); os.unlink("blink")\' '
            "&& echo x > b && mv b c && chmod 600 c && mkdir d && touch d/inner"
        )
        assert res.exit_code == 0, res
        got = take(w, 8)
    assert w.closed
    want = [
        ("create", "/workspace/w/blink", "", False),
        ("remove", "/workspace/w/blink", "", False),
        ("create", "/workspace/w/b", "", False),
        ("write", "/workspace/w/b", "", False),
        ("rename", "/workspace/w/c", "/workspace/w/b", False),
        ("chmod", "/workspace/w/c", "", False),
        ("create", "/workspace/w/d", "", True),
        ("create", "/workspace/w/d/inner", "", False),
    ]
    assert [(e.type, e.path, e.old_path, e.is_dir) for e in got] == want
    assert all(e.time is not None for e in got)
    # The iteration after close ends at once.
    assert list(w) == []


def test_watch_not_recursive_and_relative_default(sbx: Sandbox) -> None:
    sbx.files.mkdir("/workspace/sub")
    with sbx.files.watch() as w:
        assert w.path == "/workspace"
        sbx.exec("touch /workspace/sub/deep && touch /workspace/top")
        ev = take(w, 1)[0]
    # A change in a subdirectory is not reported without recursive.
    assert (ev.type, ev.path) == ("create", "/workspace/top")


def test_close_from_another_thread_stops_the_iteration(sbx: Sandbox) -> None:
    w = sbx.files.watch("/workspace")
    seen: list[WatchEvent] = []
    done = threading.Event()
    errors: list[BaseException] = []

    def read() -> None:
        try:
            for ev in w:
                seen.append(ev)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        done.set()

    t = threading.Thread(target=read, daemon=True)
    t.start()
    sbx.exec(": > /workspace/one")
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [e.path for e in seen] == ["/workspace/one"]
    w.close()
    assert done.wait(10), "the iteration did not end after close"
    assert errors == []


def test_watch_errors(sbx: Sandbox) -> None:
    with pytest.raises(NotFoundError):
        sbx.files.watch("/workspace/missing")
    sbx.files.write_file("/workspace/file.txt", "x")
    with pytest.raises(BadRequestError):
        sbx.files.watch("/workspace/file.txt")
    sbx.files.mkdir("/workspace/gone")
    w = sbx.files.watch("/workspace/gone")
    sbx.exec("rmdir /workspace/gone")
    with pytest.raises(NotFoundError):
        for _ in w:
            pass
    assert w.closed


def test_async_watch(server: Server) -> None:
    async def main() -> None:
        async with AsyncSandbox.create(timeout_seconds=120) as sbx:
            async with sbx.files.watch("/workspace") as w:
                await sbx.exec(": > /workspace/a && mv /workspace/a /workspace/b")
                got = []
                async for ev in w:
                    got.append((ev.type, ev.old_path, ev.path))
                    if len(got) == 2:
                        break
            assert got == [("create", "", "/workspace/a"), ("rename", "/workspace/a", "/workspace/b")]
            assert w.closed
            # Awaited rather than entered; a task that reads it is cancelled.
            w2 = await sbx.files.watch("/workspace")
            reader = asyncio.ensure_future(w2.__anext__())
            await asyncio.sleep(0.2)
            reader.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reader
            await w2.aclose()

    asyncio.run(main())


def test_event_lines() -> None:
    ev = event_from_line('{"type":"overflow","dropped":17,"time":"2026-12-01T10:00:00.123456789Z"}')
    assert ev is not None and ev.type == "overflow" and ev.dropped == 17 and ev.time is not None
    ev = event_from_line('{"type":"rename","path":"/w/b","oldPath":"/w/a","isDir":true}')
    assert ev is not None and (ev.old_path, ev.path, ev.is_dir) == ("/w/a", "/w/b", True)
    assert event_from_line('{"type":"heartbeat"}') is None and event_from_line("  ") is None
    with pytest.raises(NotFoundError):
        event_from_line('{"type":"error","code":"not_found","message":"/w was removed"}')
