"""File watches (``sbx.files.watch``): the changes made to a directory in a
sandbox, as events from inotify inside it::

    with sbx.files.watch("/workspace", recursive=True) as w:   # in place now
        sbx.exec("touch a && mv a b && rm b")
        for ev in w:
            print(ev.type, ev.old_path, ev.path)   # create, rename a -> b, remove
            if ev.type == "remove":
                break

Every change the sandbox's kernel makes after ``watch`` returns is an event,
however short-lived the file (a file created and removed at once is a
``create`` and a ``remove``), in the order the kernel saw them; a rename
within the watch is one ``rename`` with both names. Consecutive writes of one
file not yet sent are one ``write``. Events wait in a queue of
:data:`WATCH_QUEUE_EVENTS` on the server for a client that reads slowly;
past it they are dropped and an ``overflow`` event says how many. Changes
another sandbox makes to a shared volume are not seen (each sandbox's kernel
sees its own).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from .errors import WithRuntimeError, api_error, status_of_code
from .types import parse_time

__all__ = ["WatchEvent", "WATCH_QUEUE_EVENTS", "WATCH_MAX_DIRS"]

#: How many events the server holds for a watch whose client reads slower
#: than the sandbox changes files; past it they are dropped (``overflow``).
WATCH_QUEUE_EVENTS = 4096
#: How many directories one recursive watch follows; past it the watch ends
#: with an error.
WATCH_MAX_DIRS = 8192


@dataclass(frozen=True)
class WatchEvent:
    """One change a file watch reports."""

    #: ``"create"`` (a file, directory or link appeared), ``"write"`` (a
    #: file's contents changed), ``"remove"``, ``"rename"`` (``old_path`` to
    #: ``path``, both inside the watch), ``"chmod"`` (mode, owner or times
    #: changed) or ``"overflow"`` (events were lost: ``dropped`` of them, 0
    #: when the sandbox's kernel lost an unknown number).
    type: Literal["create", "write", "remove", "rename", "chmod", "overflow"] | str
    #: The absolute path inside the sandbox that changed (for a rename, its
    #: new name); ``""`` for an overflow.
    path: str = ""
    #: A renamed path's name before the rename (``rename`` only), else ``""``.
    old_path: str = ""
    #: The path is a directory.
    is_dir: bool = False
    #: A ``create`` or ``write`` that is the file API's own write landing
    #: (an upload, or a move across file systems), reported as a plain write.
    upload: bool = False
    #: When the agent read the event from the sandbox's kernel (UTC).
    time: datetime | None = None
    #: How many events were lost before an ``overflow`` (0: an unknown number).
    dropped: int = 0
    _raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WatchEvent:
        return cls(
            type=d.get("type", ""),
            path=d.get("path", "") or "",
            old_path=d.get("oldPath", "") or "",
            is_dir=bool(d.get("isDir", False)),
            upload=bool(d.get("upload", False)),
            time=parse_time(d.get("time")),
            dropped=int(d.get("dropped", 0) or 0),
            _raw=dict(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The event as the server sent it (camelCase keys)."""
        return dict(self._raw)


def event_from_line(line: str) -> WatchEvent | None:
    """One NDJSON line of a watch's stream as an event (``ready`` too); None
    for a blank line and a heartbeat. An ``error`` line (the watch ended:
    the directory was removed or moved, or too many directories) raises the
    APIError of its code."""
    line = line.strip()
    if not line:
        return None
    try:
        d = json.loads(line)
    except ValueError as e:
        raise WithRuntimeError(f"withruntime: bad event in watch stream: {e}") from e
    if not isinstance(d, dict):
        raise WithRuntimeError("withruntime: bad event in watch stream: not a JSON object")
    kind = d.get("type")
    if kind == "heartbeat":
        return None
    if kind == "error":
        code = str(d.get("code") or "internal")
        raise api_error(status_of_code(code), code, str(d.get("message") or "the watch ended without a message"))
    return WatchEvent.from_dict(d)


def watch_params(path: str, recursive: bool) -> list[tuple[str, str]]:
    """The query of GET .../files/watch."""
    q = [("path", path or "/workspace")]
    if recursive:
        q.append(("recursive", "true"))
    return q
