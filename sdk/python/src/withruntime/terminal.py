"""Terminals: a program on a pseudo-terminal inside a sandbox (a shell, a
REPL, vim, tmux), shaped after E2B's ``sandbox.pty``::

    from withruntime import PtySize

    term = sbx.pty.create(PtySize(cols=80, rows=24), on_data=lambda b: sys.stdout.buffer.write(b))
    term.send_input(b"python3\\n")
    term.resize(PtySize(cols=120, rows=40))
    term.send_input(b"exit()\\n")
    term.send_input(b"exit 3\\n")
    term.wait().exit_code  # 3

The program is a background process started with ``pty`` (POST
/v1/sandboxes/{id}/processes); its I/O is the WebSocket GET
/v1/sandboxes/{id}/processes/{pid}/terminal (api/openapi.yaml): output as
bytes, exactly as the program wrote them (a UTF-8 character may be split
between two ``on_data`` calls), input as bytes, resize and signal as small
JSON messages, the exit code at the end. A connection first gets the
program's recent output (the last 1 MiB), then live output; a connection
that falls 1 MiB behind misses the oldest output (``dropped`` says how much)
and the program never waits for it. The program runs on when every
connection has gone (``disconnect``); ``sbx.pty.connect(pid)`` connects
again.

The SDK speaks WebSocket with the ``websockets`` package (its asyncio
client for :class:`~withruntime.AsyncSandbox`, its threaded one for
:class:`~withruntime.Sandbox`, whose ``on_data`` runs in a thread of the
terminal's own). This module holds what both share; the handles are
``Terminal`` / ``AsyncTerminal`` and ``sbx.pty`` is ``Pty`` / ``AsyncPty``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from . import _http

__all__ = [
    "PtySize",
    "TerminalEvent",
    "TerminalExit",
    "MAX_PTY_COLS",
    "MAX_PTY_ROWS",
    "MAX_TERMINAL_MESSAGE_BYTES",
    "TERMINAL_REPLAY_BYTES",
    "MAX_TERMINAL_VIEWERS",
    "DEFAULT_TERM",
]

#: The widest terminal a request may ask for (columns).
MAX_PTY_COLS = 1000
#: The tallest terminal a request may ask for (rows).
MAX_PTY_ROWS = 1000
#: The most one WebSocket message may carry (64 KiB); ``send_input`` cuts
#: longer input into messages of this size.
MAX_TERMINAL_MESSAGE_BYTES = 64 << 10
#: How much recent output a terminal keeps for a connection that comes
#: later, and how far a slow connection may fall behind before it misses
#: output (1 MiB).
TERMINAL_REPLAY_BYTES = 1 << 20
#: How many connections one terminal takes at once; one more raises
#: RateLimitedError.
MAX_TERMINAL_VIEWERS = 16
#: The TERM a terminal's program gets unless ``env`` or the sandbox sets one.
DEFAULT_TERM = "xterm-256color"

#: What a terminal runs when given no command: a login shell (bash, or sh
#: where there is no bash).
LOGIN_SHELL = "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"


@dataclass(frozen=True)
class PtySize:
    """A terminal's size in character cells: ``cols`` (1 to 1000) by
    ``rows`` (1 to 1000). The default is 80 by 24."""

    cols: int = 80
    rows: int = 24

    def check(self) -> PtySize:
        """The size, or ValueError saying what is out of range."""
        if not (1 <= self.cols <= MAX_PTY_COLS and 1 <= self.rows <= MAX_PTY_ROWS):
            raise ValueError(
                f"a terminal is 1 to {MAX_PTY_COLS} columns by 1 to {MAX_PTY_ROWS} rows, "
                f"not cols={self.cols}, rows={self.rows}"
            )
        return self

    def to_dict(self) -> dict[str, int]:
        return {"cols": int(self.cols), "rows": int(self.rows)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PtySize:
        return cls(cols=int(d.get("cols") or 0), rows=int(d.get("rows") or 0))


@dataclass(frozen=True)
class TerminalEvent:
    """A JSON message the server sends on a terminal's WebSocket: ``exit``
    (the program ended: ``exit_code``, ``signal`` and the flags say how; the
    last message), ``dropped`` (this connection fell more than 1 MiB behind;
    ``dropped`` is the bytes it has missed in all) or ``error`` (a control
    message the server could not accept, or the sandbox stopped or paused;
    ``message`` says why)."""

    type: Literal["exit", "dropped", "error"]
    #: The program's exit status (exit): 128+N when signal N ended it (130
    #: after Ctrl-C), 124 when its timeout did, 137 when it was killed at
    #: the sandbox's memory or process limit.
    exit_code: int | None = None
    signal: str = ""
    timed_out: bool = False
    oom_killed: bool = False
    process_limit_killed: bool = False
    #: Bytes of output this connection has missed (dropped).
    dropped: int = 0
    message: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TerminalEvent:
        code = d.get("exitCode")
        return cls(
            type=d.get("type", ""),
            exit_code=None if code is None else int(code),
            signal=str(d.get("signal") or ""),
            timed_out=bool(d.get("timedOut")),
            oom_killed=bool(d.get("oomKilled")),
            process_limit_killed=bool(d.get("processLimitKilled")),
            dropped=int(d.get("dropped") or 0),
            message=str(d.get("message") or ""),
        )


@dataclass(frozen=True)
class TerminalExit:
    """How a terminal's program ended (``Terminal.wait()``)."""

    #: Its exit status: 128+N when signal N ended it (130 after Ctrl-C), 124
    #: when its timeout did, 137 when it was killed at the sandbox's memory
    #: or process limit.
    exit_code: int
    #: The signal that ended it ("SIGKILL", ...), or "".
    signal: str = ""
    timed_out: bool = False
    oom_killed: bool = False
    process_limit_killed: bool = False


def exit_of(ev: TerminalEvent) -> TerminalExit:
    return TerminalExit(
        exit_code=ev.exit_code if ev.exit_code is not None else -1,
        signal=ev.signal,
        timed_out=ev.timed_out,
        oom_killed=ev.oom_killed,
        process_limit_killed=ev.process_limit_killed,
    )


def parse_event(text: str) -> TerminalEvent | None:
    """A text message as an event; None for one that is not (skipped, as a
    type this SDK does not know)."""
    try:
        d = json.loads(text)
    except ValueError:
        return None
    if not isinstance(d, dict) or d.get("type") not in ("exit", "dropped", "error"):
        return None
    return TerminalEvent.from_dict(d)


def process_body(
    size: PtySize,
    command: str | Sequence[str] | None,
    cwd: str | None,
    env: Mapping[str, str] | None,
    user: str | None,
    timeout_seconds: float | None,
) -> dict[str, Any]:
    """The body of POST .../processes for a terminal. A list or tuple
    ``command`` is an argv; None a login shell."""
    if command is None:
        command = LOGIN_SHELL
    body = _http.exec_body(
        command,
        argv=None,
        cwd=cwd,
        env=env,
        timeout_seconds=timeout_seconds,
        max_output_bytes=None,
        stdin=None,
        user=user,
    )
    body["pty"] = size.check().to_dict()
    return body


def ws_url(base_url: str, path: str) -> str:
    """The WebSocket URL of an API path (http -> ws, https -> wss)."""
    if base_url.startswith("https://"):
        return "wss://" + base_url[len("https://") :] + path
    if base_url.startswith("http://"):
        return "ws://" + base_url[len("http://") :] + path
    raise ValueError(f"withruntime: the server URL {base_url!r} is not http:// or https://")


def control(kind: str, **fields: Any) -> str:
    """A control message (resize, signal) as the server takes it."""
    return json.dumps({"type": kind, **fields})


def input_chunks(data: bytes | str) -> list[bytes]:
    """Input as messages of at most MAX_TERMINAL_MESSAGE_BYTES; a str is
    sent as UTF-8."""
    b = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return [b[i : i + MAX_TERMINAL_MESSAGE_BYTES] for i in range(0, len(b), MAX_TERMINAL_MESSAGE_BYTES)]
