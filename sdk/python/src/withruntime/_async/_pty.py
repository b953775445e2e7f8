"""Terminals of a sandbox (``sbx.pty``): :class:`AsyncPty` and
:class:`AsyncTerminal`, and their sync twins ``Pty`` and ``Terminal``
(``_sync/_pty.py`` is generated from this file; see _client.py). What
travels on a terminal, and the shared helpers, are in
:mod:`withruntime.terminal`."""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from .. import _http, _wait
from .. import _io_async as _io
from .. import terminal as _t
from ..errors import NotFoundError, TerminalDisconnectedError, TransportError, WithRuntimeError
from ..terminal import PtySize, TerminalExit
from ._base import AsyncSandboxHandle

__all__ = ["AsyncPty", "AsyncTerminal"]

#: The output callback: called with each chunk of output, in order, from one
#: reader (a thread of the terminal's own in the sync client; in the async
#: client it may be a coroutine function). It must not block for long: while
#: it runs no output is read, and a terminal that falls 1 MiB behind loses
#: its oldest output (``dropped``).
OnData = Any


class AsyncPty:
    """The terminals of one sandbox (``sbx.pty``), shaped after E2B's
    ``sandbox.pty``: ``create``, ``connect``, and by pid ``send_stdin``,
    ``resize`` and ``kill``."""

    def __init__(self, sandbox: AsyncSandboxHandle) -> None:
        self._sandbox = sandbox

    async def create(
        self,
        size: PtySize | None = None,
        on_data: OnData | None = None,
        *,
        command: str | Sequence[str] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        timeout_seconds: float | None = None,
    ) -> AsyncTerminal:
        """Starts a program on a new terminal of ``size`` (default 80 by
        24) and connects to it; ``on_data`` gets its output as bytes.

        ``command`` is a shell command line (``bash -c``) or a list (an argv
        run without a shell); None starts a login shell (``bash -l``). The
        program leads a session of its own with the terminal as its
        controlling tty, TERM is ``xterm-256color`` unless ``env`` sets it;
        ``cwd`` (default /workspace), ``env`` and ``user`` (``"user"`` or
        ``"root"``) are as for exec. It has no timeout unless
        ``timeout_seconds`` gives one (then it is killed and exits 124); the
        sandbox's lease ends it.

        Raises ValueError (a size out of range), BadRequestError (a cwd that
        does not exist, an argv program not in PATH), LeaseEndedError,
        SandboxStoppedError, SandboxPausedError, TransportError.
        """
        body = _t.process_body(size or PtySize(), command, cwd, env, user, timeout_seconds)
        out: Any = await self._sandbox._client._json("POST", self._sandbox._path("/processes"), body)
        pid = int(out["pid"])
        try:
            return await self.connect(pid, on_data)
        except BaseException:
            # Nothing left behind: the program would run with nobody on it.
            try:
                await self._sandbox._client._send("POST", self._pid_path(pid, "/kill"))
            except WithRuntimeError:
                pass
            raise

    async def connect(self, pid: int, on_data: OnData | None = None) -> AsyncTerminal:
        """Connects to the terminal of process ``pid`` (made by
        :meth:`create`, the CLI's ``sandbox shell`` or the API with
        ``pty``): ``on_data`` first gets its recent output (the last 1 MiB
        at most), then live output. Several connections may be open at once
        (up to 16), and each may send input.

        Raises NotFoundError (no such process), ConflictError (a process
        without a terminal), RateLimitedError (too many connections), the
        sandbox's state errors, TransportError.
        """
        c = self._sandbox._client
        url = _t.ws_url(c.base_url, self._pid_path(pid, "/terminal"))
        hdrs = _http.headers(c._api_key, _http.JSON)
        hdrs.pop("Accept", None)
        try:
            ws = await _io.ws_connect(
                url, hdrs, max_size=2 * _t.MAX_TERMINAL_MESSAGE_BYTES, open_timeout=c._response or None
            )
        except InvalidStatus as e:
            r = e.response
            raise _http.decode_error(r.status_code, r.reason_phrase, bytes(r.body or b"")) from e
        except (OSError, TimeoutError, WebSocketException) as e:
            raise TransportError(f"withruntime: cannot open the terminal of process {pid} at {c.base_url}: {e}") from e
        return AsyncTerminal(self, pid, ws, on_data)

    async def send_stdin(self, pid: int, data: bytes | str) -> None:
        """Writes ``data`` to the terminal of process ``pid`` as typed input
        (Ctrl-C is ``"\\x03"``, Ctrl-D ``"\\x04"``), without a connection:
        POST .../stdin, 1 MiB at a time. Raises NotFoundError,
        ConflictError (the program has ended), APITimeoutError (it read
        nothing for 10 s)."""
        b = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        for i in range(0, len(b), 1 << 20):
            await self._sandbox._client._send(
                "POST",
                self._pid_path(pid, "/stdin"),
                content=b[i : i + (1 << 20)],
                content_type="application/octet-stream",
            )

    async def resize(self, pid: int, size: PtySize) -> None:
        """Sets the size of the terminal of process ``pid``; its program
        gets SIGWINCH. Raises ValueError (out of range), NotFoundError,
        ConflictError (a process without a terminal, or one that ended)."""
        await self._sandbox._client._json("POST", self._pid_path(pid, "/resize"), size.check().to_dict())

    async def kill(self, pid: int) -> bool:
        """Kills everything the terminal's program started (SIGKILL). True
        when it was running, False when it had already ended or there is no
        such process, as E2B's ``pty.kill``."""
        try:
            proc: Any = await self._sandbox._client._json("GET", self._pid_path(pid))
            if not proc.get("running"):
                return False
            await self._sandbox._client._send("POST", self._pid_path(pid, "/kill"))
        except NotFoundError:
            return False
        return True

    async def list(self) -> builtins.list[dict[str, Any]]:
        """The sandbox's background processes that run on a terminal (their
        records as the API gives them: ``pid``, ``command`` or ``argv``,
        ``pty``, ``running``, ``result``)."""
        out: Any = await self._sandbox._client._json("GET", self._sandbox._path("/processes"))
        return [p for p in out.get("processes") or [] if p.get("pty")]

    def _pid_path(self, pid: int, suffix: str = "") -> str:
        return self._sandbox._path(f"/processes/{int(pid)}{suffix}")


class AsyncTerminal:
    """One connection to a program's terminal (see :mod:`withruntime.terminal`).

    ``pid`` is the program's process id in the sandbox. Output goes to the
    ``on_data`` given at create or connect; ``send_input``, ``resize``,
    ``signal`` and ``kill`` act on the program; ``wait`` waits for it to
    end; ``disconnect`` leaves it running."""

    def __init__(self, pty: AsyncPty, pid: int, ws: _io.WebSocket, on_data: OnData | None) -> None:
        #: The program's process id in the sandbox.
        self.pid = pid
        self._pty = pty
        self._ws = ws
        self._on_data = on_data
        self._done = _io.Event()
        self._exit: TerminalExit | None = None
        self._dropped = 0
        self._errors: builtins.list[str] = []
        self._failure: BaseException | None = None
        self._reader = _io.spawn(self._read)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(pid={self.pid!r})"

    async def _read(self) -> None:
        try:
            async for msg in self._ws:
                if isinstance(msg, bytes):
                    if self._on_data is not None and msg:
                        await _io.resolve(self._on_data(msg))
                    continue
                ev = _t.parse_event(msg)
                if ev is None:
                    continue
                if ev.type == "exit":
                    self._exit = _t.exit_of(ev)
                elif ev.type == "dropped":
                    self._dropped = ev.dropped
                elif ev.type == "error":
                    self._errors.append(ev.message)
        except ConnectionClosed as e:
            if self._exit is None:
                self._failure = e
        except Exception as e:  # on_data raised: the connection ends with it
            self._failure = e
            try:
                await self._ws.close()
            except Exception:  # noqa: BLE001 - the error kept is on_data's
                pass
        finally:
            self._done.set()

    @property
    def dropped(self) -> int:
        """How many bytes of output this connection missed because it fell
        more than 1 MiB behind (``on_data`` too slow); the program never
        waits."""
        return self._dropped

    @property
    def errors(self) -> builtins.list[str]:
        """The server's answers to control messages it could not accept,
        and why the connection ended early, oldest first."""
        return builtins.list(self._errors)

    @property
    def exit(self) -> TerminalExit | None:
        """How the program ended, once this connection has seen it."""
        return self._exit

    async def send_input(self, data: bytes | str) -> None:
        """Writes ``data`` to the terminal as typed input (Enter is ``"\\r"``
        or ``"\\n"``, Ctrl-C ``"\\x03"``, Ctrl-D ``"\\x04"``; a str is sent
        as UTF-8). Raises TerminalDisconnectedError when the connection has
        ended."""
        for chunk in _t.input_chunks(data):
            await self._send(chunk)

    async def resize(self, size: PtySize) -> None:
        """Sets the terminal's size; the program gets SIGWINCH. Raises
        ValueError (out of range), TerminalDisconnectedError."""
        await self._send(_t.control("resize", **size.check().to_dict()))

    async def signal(self, signal: str) -> None:
        """Sends ``signal`` ("SIGTERM", "SIGINT", ...) to everything the
        program started. To interrupt only its foreground job, as a person
        does, send ``"\\x03"`` as input instead. An unknown signal is
        answered in :attr:`errors`."""
        await self._send(_t.control("signal", signal=signal))

    async def kill(self) -> bool:
        """Kills everything the program started (SIGKILL, through the
        processes API, so it works also when the connection has ended).
        Returns :meth:`Pty.kill`'s answer."""
        return await self._pty.kill(self.pid)

    async def wait(self, timeout: float | None = None) -> TerminalExit:
        """Waits for the program to end and returns how. Raises
        TerminalDisconnectedError when the connection ends first (the
        program may still run: connect again), the built-in TimeoutError
        when ``timeout`` (seconds) passes first (the connection stays), and
        what ``on_data`` raised if it did (the connection then ended)."""
        if not await _io.wait_event(self._done, timeout):
            raise TimeoutError(f"withruntime: the program of terminal {self.pid} still runs after {timeout} s")
        if self._exit is not None:
            return self._exit
        if self._failure is not None and not isinstance(self._failure, ConnectionClosed):
            raise self._failure
        why = "; ".join(self._errors) or (str(self._failure) if self._failure else "closed")
        raise TerminalDisconnectedError(
            f"withruntime: the connection to the terminal of process {self.pid} ended before its program ({why}); "
            "connect again with sbx.pty.connect(pid)"
        )

    async def disconnect(self) -> None:
        """Closes this connection; the program runs on (connect again with
        ``sbx.pty.connect(pid)``)."""
        try:
            await self._ws.close()
        except (OSError, WebSocketException):
            pass
        await _io.wait_event(self._done, _wait.DEFAULT_RESPONSE_TIMEOUT)

    async def _send(self, message: bytes | str) -> None:
        try:
            await self._ws.send(message)
        except ConnectionClosed as e:
            raise TerminalDisconnectedError(
                f"withruntime: the connection to the terminal of process {self.pid} has ended ({e}); "
                "connect again with sbx.pty.connect(pid)"
            ) from e
