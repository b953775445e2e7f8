"""pty: the SDK's pseudo-terminals over envd's process service (Start with a
pty, SendInput/StreamInput with pty input, Update, Connect, SendSignal),
served by Runtime's terminals."""

import asyncio
import re
import threading
import time

import pytest
from e2b import AsyncSandbox, CommandExitException
from e2b.sandbox.commands.command_handle import PtySize


class Screen:
    """Reads a pty handle's output in a thread; wait_for blocks until some
    bytes have arrived."""

    def __init__(self, handle):
        self.handle = handle
        self.data = bytearray()
        self.done = False
        self.error = None
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for _, _, pty in self.handle:
                if pty:
                    with self.cond:
                        self.data += pty
                        self.cond.notify_all()
        except Exception as e:  # noqa: BLE001 - kept for the assertion message
            self.error = e
        finally:
            with self.cond:
                self.done = True
                self.cond.notify_all()

    def wait_for(self, want: bytes, timeout: float = 30):
        deadline = time.time() + timeout
        with self.cond:
            while want not in self.data:
                left = deadline - time.time()
                assert left > 0 and not self.done, f"no {want!r} in {bytes(self.data)!r} (ended: {self.done}, {self.error})"
                self.cond.wait(left)

    def wait_line(self, line: bytes, timeout: float = 30):
        """Waits for a whole line of output: the terminal's echo of what was
        typed does not count (bash's prompt may end a line with \r or with
        the bracketed-paste switch)."""
        pat = re.compile(rb"[\r\n]" + re.escape(line) + rb"\r\n")
        deadline = time.time() + timeout
        with self.cond:
            while not pat.search(self.data):
                left = deadline - time.time()
                assert left > 0 and not self.done, f"no line {line!r} in {bytes(self.data)!r} (ended: {self.done}, {self.error})"
                self.cond.wait(left)

    def wait_end(self, timeout: float = 30):
        deadline = time.time() + timeout
        with self.cond:
            while not self.done:
                left = deadline - time.time()
                assert left > 0, f"the handle did not end; output {bytes(self.data)!r}"
                self.cond.wait(left)


def test_create_resize_input_reconnect_kill(sandbox):
    h = sandbox.pty.create(PtySize(rows=24, cols=80), timeout=0)
    assert h.pid > 0
    screen = Screen(h)
    sandbox.pty.send_stdin(h.pid, b"stty size; tty; echo term=$TERM\n")
    screen.wait_line(b"24 80")
    screen.wait_for(b"\n/dev/pts/")
    screen.wait_line(b"term=xterm-256color")

    sandbox.pty.resize(h.pid, PtySize(rows=40, cols=120))
    sandbox.pty.send_stdin(h.pid, b"stty size\n")
    screen.wait_line(b"40 120")

    sandbox.pty.send_stdin(h.pid, b"echo hi\n")
    screen.wait_line(b"hi")
    sandbox.pty.stream_input(h.pid, [b"echo ", "stre", b"amed\n"])
    screen.wait_line(b"streamed")

    # The pty is a process like any other to commands.list.
    assert h.pid in [p.pid for p in sandbox.commands.list()]

    # A second connection: the recent output first, then what both see.
    again = sandbox.pty.connect(h.pid, timeout=0)
    screen2 = Screen(again)
    screen2.wait_line(b"40 120")
    sandbox.pty.send_stdin(h.pid, b"echo back\n")
    screen2.wait_line(b"back")
    screen.wait_line(b"back")

    assert sandbox.pty.kill(h.pid) is True
    screen.wait_end()
    screen2.wait_end()
    assert screen.error is None and screen2.error is None
    assert sandbox.pty.kill(h.pid) is False  # it has ended


def test_disconnect_and_connect_again(sandbox):
    h = sandbox.pty.create(PtySize(rows=24, cols=80), timeout=0)
    sandbox.pty.send_stdin(h.pid, b"cd /tmp; echo before\n")
    h.disconnect()  # the shell runs on
    again = sandbox.pty.connect(h.pid, timeout=0)
    screen = Screen(again)
    screen.wait_line(b"before")
    sandbox.pty.send_stdin(h.pid, b"pwd\n")
    screen.wait_line(b"/tmp")
    sandbox.pty.kill(h.pid)
    screen.wait_end()


def test_exit_code_and_ctrl_c(sandbox):
    h = sandbox.pty.create(PtySize(rows=24, cols=80), timeout=0)
    screen = Screen(h)
    sandbox.pty.send_stdin(h.pid, b"sleep 100\n")
    time.sleep(1)
    sandbox.pty.send_stdin(h.pid, b"\x03")  # Ctrl-C: SIGINT to the foreground job
    sandbox.pty.send_stdin(h.pid, b"echo status=$?\n")
    screen.wait_line(b"status=130")
    sandbox.pty.send_stdin(h.pid, b"exit\n")  # the prompt came back: the shell reads
    screen.wait_end()


def test_wait_raises_on_exit_code(sandbox):
    h = sandbox.pty.create(PtySize(rows=24, cols=80), timeout=0)
    sandbox.pty.send_stdin(h.pid, b"exit 3\n")
    with pytest.raises(CommandExitException) as e:
        h.wait()
    assert e.value.exit_code == 3


def test_async_create_with_on_data(sandbox):
    async def run():
        sbx = await AsyncSandbox.connect(sandbox.sandbox_id)
        got = bytearray()
        seen = asyncio.Event()

        def on_data(data: bytes):
            got.extend(data)
            if re.search(rb"[\r\n]42\r\n", got):
                seen.set()

        h = await sbx.pty.create(PtySize(rows=24, cols=80), on_data=on_data, timeout=0)
        await sbx.pty.send_stdin(h.pid, b"python3 -c 'print(6*7)'\n")
        await asyncio.wait_for(seen.wait(), 30)
        await sbx.pty.resize(h.pid, PtySize(rows=30, cols=100))
        await sbx.pty.send_stdin(h.pid, b"exit\n")
        result = await h.wait()
        assert result.exit_code == 0

    asyncio.run(run())


def test_refusals(sandbox):
    from e2b.exceptions import InvalidArgumentException, SandboxException

    with pytest.raises(InvalidArgumentException):
        sandbox.pty.create(PtySize(rows=0, cols=80))
    # A command without a terminal cannot be resized.
    h = sandbox.commands.run("sleep 600", background=True)
    with pytest.raises(SandboxException):
        sandbox.pty.resize(h.pid, PtySize(rows=30, cols=100))
    h.kill()
