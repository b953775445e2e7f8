"""AsyncSandbox: the same surface with asyncio, against the real server."""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from withruntime import (
    AsyncClient,
    AsyncSandbox,
    BadRequestError,
    LeaseEndedError,
    NotFoundError,
    SandboxPausedError,
    SandboxStoppedError,
)
from withruntime.tools import adispatch, sandbox_tools

from .conftest import Server


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_async_basics(server: Server) -> None:
    async def main() -> None:
        async with AsyncSandbox.create(
            network={"internet": False}, timeout_seconds=300, metadata={"test": "async"}
        ) as sbx:
            assert sbx.id.startswith("sbx_") and sbx.info is not None and sbx.info.state == "running"
            res = await sbx.exec("python3 -c 'print(6*7)'")
            assert (res.exit_code, res.stdout) == (0, "42\n")

            failed = await sbx.exec("echo no >&2; exit 7")
            assert (failed.exit_code, failed.stderr) == (7, "no\n")
            with pytest.raises(BadRequestError):
                await sbx.exec("ls", cwd="/missing")

            events = [ev async for ev in sbx.exec_stream("echo a; sleep 0.2; echo b >&2; exit 2")]
            assert [e.type for e in events][0] == "start" and events[-1].type == "exit"
            assert events[-1].result is not None and events[-1].result.exit_code == 2
            assert "".join(e.data for e in events if e.type == "stdout") == "a\n"
            assert "".join(e.data for e in events if e.type == "stderr") == "b\n"
            out = io.BytesIO()
            assert (await sbx.exec_to("printf 'x\\xff'", stdout=out)).exit_code == 0
            assert out.getvalue() == b"x\xff"

            data = bytes(range(256)) * 64 + os.urandom(100_000)
            assert (await sbx.files.write_file("bin/d.bin", data)).size == len(data)
            assert await sbx.files.read_file("bin/d.bin") == data

            async def gen() -> AsyncIterator[bytes]:
                for i in range(8):
                    yield bytes([i]) * 65536

            info = await sbx.files.write("gen.bin", gen())
            assert info.size == 8 * 65536
            buf = io.BytesIO()
            assert await sbx.files.read("gen.bin", buf) == 8 * 65536
            assert (
                hashlib.sha256(buf.getvalue()).digest()
                == hashlib.sha256(b"".join(bytes([i]) * 65536 for i in range(8))).digest()
            )
            reader = await sbx.files.open("gen.bin")
            async with reader:
                assert reader.size == 8 * 65536
                assert len(await reader.read()) == 8 * 65536

            await sbx.files.write_text("t.txt", "héllo")
            assert await sbx.files.read_text("t.txt") == "héllo"
            assert [e.name for e in await sbx.files.list("bin")] == ["d.bin"]
            assert (await sbx.files.stat("bin")).is_dir
            await sbx.files.mkdir("m/n", parents=True)
            await sbx.files.rename("t.txt", "m/t.txt")
            assert await sbx.files.exists("m/t.txt")
            await sbx.files.remove_all("m")
            assert not await sbx.files.exists("m")
            with pytest.raises(NotFoundError):
                await sbx.files.read_file("nope")

            # connect from another client, and list
            async with AsyncClient() as c:
                again = await AsyncSandbox.connect(sbx.id, client=c)
                assert (await again.exec("cat bin/d.bin | wc -c")).stdout.strip() == str(len(data))
                assert sbx.id in [s.id for s in await AsyncSandbox.list(metadata={"test": "async"}, client=c)]
            sid = sbx.id
        infos = await AsyncSandbox.list(metadata={"test": "async"})
        assert [(i.id, i.state) for i in infos] == [(sid, "stopped")]
        with pytest.raises(SandboxStoppedError):
            await AsyncSandbox.connect(sid)

    run(main())


def test_async_pause_and_resume(server: Server) -> None:
    async def main() -> None:
        async with AsyncSandbox.create(timeout_seconds=300) as sbx:
            await sbx.files.write_file("kept.txt", "kept")
            info = await sbx.pause()
            assert info.state == "paused" and info.image_bytes > 0
            with pytest.raises(SandboxPausedError):
                await sbx.exec("true")
            again = await AsyncSandbox.connect(sbx.id, client=sbx.client)  # resumes it
            assert again.info is not None and again.info.state == "running"
            assert (await again.exec("cat kept.txt")).stdout == "kept"
            await sbx.pause()
            assert (await sbx.resume(timeout_seconds=600)).state == "running"

    run(main())


def test_async_tools_and_lease_end(server: Server) -> None:
    async def main() -> None:
        sbx = await AsyncSandbox.create(timeout_seconds=120, metadata={"test": "async-lease"})
        run_, read, write, ls = sandbox_tools(sbx)
        assert (await write("hello.py", "print(6 * 7)\n"))["data"] == {"path": "/workspace/hello.py", "bytes": 13}
        res = await run_("python3 hello.py")
        assert res["data"]["exitCode"] == 0 and res["data"]["stdout"] == "42\n"
        assert (await adispatch(sandbox_tools(sbx), "runtime_read_file", '{"path": "hello.py"}'))["data"][
            "content"
        ] == "print(6 * 7)\n"
        assert (await ls())["text"].startswith("/workspace: 1 entry")
        assert "invalid arguments" in (await run_(cmd="ls"))["text"]

        await sbx.set_timeout(1)
        await asyncio.sleep(1)
        deadline = time.monotonic() + 20
        while (await sbx.refresh()).state != "stopped":
            assert time.monotonic() < deadline, "the lease did not end"
            await asyncio.sleep(0.2)
        with pytest.raises(LeaseEndedError) as ei:
            await sbx.exec("true")
        assert ei.value.code == "lease_ended" and ei.value.status == 410
        with pytest.raises(LeaseEndedError) as ti:
            await run_("true")
        assert ti.value.tool_result["isError"]  # type: ignore[attr-defined]
        with pytest.raises(LeaseEndedError):
            async for _ in sbx.exec_stream("true"):
                pass
        await sbx.close()  # a sandbox whose lease ended counts as destroyed
        with pytest.raises(SandboxStoppedError):
            await sbx.exec("true")

    run(main())


def test_async_run_once_and_create_and_exec(server: Server) -> None:
    async def main() -> None:
        async with AsyncClient(server.url, server.key) as c:
            res = await c.run_once(argv=["sh", "-c", "echo $0 $A", "once"], env={"A": "async"})
            assert (res.exit_code, res.stdout) == (0, "once async\n")
            sbx, res = await c.create_and_exec("echo first; exit 4")
            try:
                assert (res.exit_code, res.stdout) == (4, "first\n")
                assert (await sbx.exec("echo second")).stdout == "second\n"
            finally:
                await sbx.kill()
            with pytest.raises(BadRequestError) as ei:
                await c.run_once("true", cwd="/nowhere", metadata={"t": "async-nowhere"})
            assert "/nowhere" in ei.value.message
            [info] = await c.list(metadata={"t": "async-nowhere"})
            assert info.state == "stopped"  # run_once destroyed the sandbox it made

    run(main())
