# GENERATED from withruntime/_async/_watch.py by sdk/python/scripts/generate.sh (unasync); do not edit.
# Change the async source and run sdk/python/scripts/generate.sh to regenerate.
"""A live file watch (``sbx.files.watch``): FileWatch and AsyncFileWatch;
``_sync/_watch.py`` is generated from ``_async/_watch.py`` (see _client.py).
The events and how they are read are in :mod:`withruntime.watch`."""

from __future__ import annotations

from collections.abc import Iterator

import httpx

from .. import _wait
from ..errors import WithRuntimeError
from ..watch import WatchEvent, event_from_line

__all__ = ["FileWatch"]


class FileWatch(Iterator[WatchEvent]):
    """A watch of a directory in a sandbox, in place (see
    :meth:`Files.watch`): ``for ev in w`` (``async for``) yields each change
    as a :class:`~withruntime.watch.WatchEvent` when it happens, and runs
    until the watch is stopped or ends.

    Stop it with :meth:`close` (``aclose``), or a ``with`` (``async with``)
    block: the server then stops watching, and an iteration under way ends
    (at once in the same thread or task, else within about 2 seconds, at the
    server's next heartbeat). Breaking out of the loop leaves it open.

    The iteration raises NotFoundError when the watched directory is
    removed or moved (the watch ends), BadRequestError when a recursive
    watch would follow more than :data:`~withruntime.watch.WATCH_MAX_DIRS`
    directories, WithRuntimeError when the stream ends because the sandbox
    was stopped or paused, ServerTimeoutError / TransportError when the
    server goes silent or the connection breaks."""

    def __init__(self, base_url: str, resp: httpx.Response) -> None:
        self._base_url = base_url
        self._resp = resp
        self._lines = resp.iter_lines()
        self._closed = False
        #: The watched directory, absolute inside the sandbox (set once the
        #: watch is in place).
        self.path = ""

    def _start(self) -> None:
        """Reads the ``ready`` line: the watch is in place."""
        first = self._read()
        if first.type != "ready":
            self.close()
            raise WithRuntimeError(f"withruntime: the watch began with a {first.type!r} event, not ready")
        self.path = first.path

    def _read(self) -> WatchEvent:
        """The next line that is not a heartbeat, as an event; ends the
        iteration once the watch is closed."""
        while True:
            if self._closed:
                raise StopIteration
            try:
                line = self._lines.__next__()
            except StopIteration:
                closed = self._closed
                self.close()
                if closed:
                    raise
                raise WithRuntimeError(
                    "withruntime: the watch stream ended (the sandbox may have been stopped or paused)"
                ) from None
            except Exception as e:
                closed = self._closed
                self.close()
                if closed:  # closed meanwhile: the read broke because of it
                    raise StopIteration from None
                if isinstance(e, httpx.HTTPError):
                    raise _wait.read_error(self._base_url, self._resp, e, "watch stream broke") from e
                raise
            try:
                ev = event_from_line(line)
            except WithRuntimeError:
                self.close()
                raise
            if ev is not None:
                return ev

    def __iter__(self) -> FileWatch:
        return self

    def __next__(self) -> WatchEvent:
        return self._read()

    @property
    def closed(self) -> bool:
        """Whether the watch was stopped or has ended."""
        return self._closed

    def close(self) -> None:
        """Stops the watch (the server stops watching). Safe to call more
        than once."""
        self._closed = True
        self._resp.close()

    def __enter__(self) -> FileWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
