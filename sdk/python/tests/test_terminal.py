"""Terminals (sbx.pty), sync and async, against the real server: a program
on a pseudo-terminal, its output through on_data, input, resize, signals,
kill, wait, and connecting again."""

from __future__ import annotations

import asyncio
import re
import threading
import time

import pytest

from withruntime import (
    AsyncSandbox,
    ConflictError,
    NotFoundError,
    PtySize,
    Sandbox,
    TerminalDisconnectedError,
    TerminalExit,
)

from .conftest import Server


class Screen:
    """What on_data got, and a wait for a whole line of it (the terminal's
    echo of typed input does not count: its line holds more)."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.cond = threading.Condition()

    def __call__(self, chunk: bytes) -> None:
        assert isinstance(chunk, bytes)
        with self.cond:
            self.data += chunk
            self.cond.notify_all()

    def text(self) -> str:
        with self.cond:
            return self.data.decode("utf-8", "replace")

    def until(self, text: str, count: int = 1, timeout: float = 30) -> None:
        """Waits until ``text`` has come ``count`` times."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.data.count(text.encode()) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"{text!r} has not come {count} times in {bytes(self.data)!r}"
                self.cond.wait(left)

    def line(self, line: str, timeout: float = 30) -> None:
        pat = re.compile(rb"[\r\n]" + re.escape(line.encode()) + rb"\r\n")
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pat.search(self.data):
                left = deadline - time.monotonic()
                assert left > 0, f"no line {line!r} in {bytes(self.data)!r}"
                self.cond.wait(left)


def test_shell_size_resize_input_exit(sbx: Sandbox) -> None:
    screen = Screen()
    term = sbx.pty.create(PtySize(cols=100, rows=30), on_data=screen)
    assert term.pid > 0
    term.send_input("stty size; tty; echo term=$TERM\n")
    screen.line("30 100")
    screen.line("term=xterm-256color")
    assert re.search(r"\n/dev/pts/\d+\r\n", screen.text())
    term.resize(PtySize(cols=132, rows=50))
    term.send_input(b"stty size\n")
    try:
        screen.line("50 132")
    except AssertionError as e:
        # Seen once in CI under load (stop 39): the stty after the resize
        # printed the old size. Say whether the resize was refused or only
        # late: the connection's errors, and what a second stty prints.
        term.send_input(b"stty size\n")
        time.sleep(2)
        raise AssertionError(f"{e}; errors {term.errors}; then: {screen.text()[-200:]!r}") from None
    sbx.pty.resize(term.pid, PtySize(cols=90, rows=20))  # without the connection
    term.send_input(b"stty size\n")
    screen.line("20 90")
    term.send_input(b"echo hi\n")
    screen.line("hi")
    # Ctrl-C ends the foreground job with 130; the shell's prompt comes back.
    term.send_input(b"sleep 100\n")
    time.sleep(1)
    term.send_input(b"\x03")
    term.send_input(b"echo status=$?\n")
    screen.line("status=130")
    term.send_input(b"exit 3\n")
    assert term.wait(timeout=30) == TerminalExit(exit_code=3)
    assert term.exit is not None and term.dropped == 0
    assert sbx.pty.kill(term.pid) is False  # already ended


def test_python_repl_and_reconnect(sbx: Sandbox) -> None:
    first = Screen()
    term = sbx.pty.create(on_data=first, command="python3")
    first.until(">>> ")
    term.send_input("x = 6*7\r")
    first.until(">>> ", count=2)  # evaluated: the next prompt
    term.disconnect()  # the program runs on
    with pytest.raises(TerminalDisconnectedError):
        term.wait(timeout=5)
    with pytest.raises(TerminalDisconnectedError):
        term.send_input(b"x\r")

    again = Screen()
    term2 = sbx.pty.connect(term.pid, on_data=again)
    again.until(">>> x = 6*7")  # the recent output comes first
    term2.send_input("print(x)\r")
    again.line("42")
    # A second connection at the same time sees the same output.
    third = Screen()
    term3 = sbx.pty.connect(term.pid, on_data=third)
    term3.send_input("print(x+1)\r")
    third.line("43")
    again.line("43")
    assert [p["pid"] for p in sbx.pty.list()] == [term.pid]
    assert term2.kill() is True
    assert term2.wait(timeout=30).signal == "SIGKILL"
    assert term3.wait(timeout=30).exit_code == 137


def test_argv_signal_and_refusals(sbx: Sandbox) -> None:
    screen = Screen()
    term = sbx.pty.create(PtySize(80, 24), screen, command=["sleep", "600"], timeout_seconds=300)
    term.signal("SIGTERM")
    got = term.wait(timeout=30)
    assert got.signal == "SIGTERM" and got.exit_code == 143
    with pytest.raises(ValueError):
        sbx.pty.create(PtySize(cols=0, rows=24))
    with pytest.raises(ValueError):
        term.resize(PtySize(cols=2000, rows=24))
    with pytest.raises(NotFoundError):
        sbx.pty.connect(99999)
    with pytest.raises(ConflictError):
        _resize_no_pty(sbx)


def _resize_no_pty(sbx: Sandbox) -> None:
    """Resizes a background process that has no terminal (the SDK has no
    call that starts one: the raw API)."""
    pid = sbx.client._json("POST", sbx._path("/processes"), {"command": "sleep 600"})["pid"]
    try:
        sbx.pty.resize(pid, PtySize(cols=10, rows=10))
    finally:
        sbx.pty.kill(pid)


def test_on_data_that_raises_ends_the_connection(sbx: Sandbox) -> None:
    def boom(chunk: bytes) -> None:
        raise RuntimeError("on_data failed")

    term = sbx.pty.create(on_data=boom, command="echo out; sleep 600")
    with pytest.raises(RuntimeError, match="on_data failed"):
        term.wait(timeout=30)
    assert sbx.pty.kill(term.pid) is True  # the program ran on


def test_async_terminal(server: Server) -> None:
    async def main() -> None:
        async with AsyncSandbox.create(timeout_seconds=300, metadata={"test": "python-pty-async"}) as sbx:
            got = bytearray()
            seen = asyncio.Event()

            async def on_data(chunk: bytes) -> None:  # a coroutine function works too
                got.extend(chunk)
                if re.search(rb"[\r\n]42\r\n", got):
                    seen.set()

            term = await sbx.pty.create(PtySize(cols=80, rows=24), on_data)
            await term.send_input("echo $((6*7))\n")
            await asyncio.wait_for(seen.wait(), 30)
            await term.resize(PtySize(cols=120, rows=40))
            await sbx.pty.send_stdin(term.pid, "stty size; exit 5\n")
            assert (await term.wait(timeout=30)).exit_code == 5
            assert re.search(rb"[\r\n]40 120\r\n", got)
            # connect again after the end: the replay, then the exit.
            replay = bytearray()
            again = await sbx.pty.connect(term.pid, replay.extend)
            assert (await again.wait(timeout=30)).exit_code == 5
            assert b"40 120" in replay

    asyncio.run(main())
