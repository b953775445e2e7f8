"""Helpers of the exec stream and of a sandbox's state, shared by the sync
and async clients: NDJSON lines to events, the end of a stream, where
output chunks go."""

from __future__ import annotations

import io
import json
from typing import Any

from .errors import WithRuntimeError, api_error, status_of_code
from .types import ErrorInfo, Event, ExecResult, SandboxInfo


def check_running(info: SandboxInfo) -> None:
    """Raises LeaseEndedError / SandboxStoppedError for a stopped sandbox."""
    if info.state == "stopped":
        code = "lease_ended" if info.end_reason == "lease_ended" else "sandbox_stopped"
        raise api_error(
            410, code, f"sandbox {info.id} is stopped ({info.end_reason or 'stopped'}); create a new sandbox"
        )


def write_chunk(w: Any, ev: Event) -> None:
    """Writes an output event to ``w``: the text to a text file, the exact
    bytes to a binary one."""
    if isinstance(w, io.TextIOBase):
        w.write(ev.data)
    else:
        w.write(ev.data_bytes)


def event_from_line(line: str) -> Event | None:
    """One NDJSON line of an exec stream as an event; None for a blank line
    and a heartbeat (the server's sign of life on a quiet stream)."""
    line = line.strip()
    if not line:
        return None
    try:
        d = json.loads(line)
    except ValueError as e:
        raise WithRuntimeError(f"withruntime: bad event in exec stream: {e}") from e
    if not isinstance(d, dict):
        raise WithRuntimeError("withruntime: bad event in exec stream: not a JSON object")
    if d.get("type") == "heartbeat":
        return None
    return Event.from_dict(d)


def end_event(ev: Event) -> ExecResult | None:
    """For an exit event its result; for an error event raises its APIError;
    None for others."""
    if ev.type == "exit":
        if ev.result is None:
            raise WithRuntimeError("withruntime: exit event without a result")
        return ev.result
    if ev.type == "error":
        e = ev.error or ErrorInfo("internal", "exec failed without a message")
        raise api_error(status_of_code(e.code), e.code, e.message)
    return None
