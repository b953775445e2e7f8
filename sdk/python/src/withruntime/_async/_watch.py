"""A live file watch (``sbx.files.watch``): FileWatch and AsyncFileWatch;
``_sync/_watch.py`` is generated from ``_async/_watch.py`` (see _client.py).
The events and how they are read are in :mod:`withruntime.watch`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from .. import _wait
from ..errors import WithRuntimeError
from ..watch import WatchEvent, event_from_line

__all__ = ["AsyncFileWatch"]


class AsyncFileWatch(AsyncIterator[WatchEvent]):
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
        self._lines = resp.aiter_lines()
        self._closed = False
        #: The watched directory, absolute inside the sandbox (set once the
        #: watch is in place).
        self.path = ""

    async def _start(self) -> None:
        """Reads the ``ready`` line: the watch is in place."""
        first = await self._read()
        if first.type != "ready":
            await self.aclose()
            raise WithRuntimeError(f"withruntime: the watch began with a {first.type!r} event, not ready")
        self.path = first.path

    async def _read(self) -> WatchEvent:
        """The next line that is not a heartbeat, as an event; ends the
        iteration once the watch is closed."""
        while True:
            if self._closed:
                raise StopAsyncIteration
            try:
                line = await self._lines.__anext__()
            except StopAsyncIteration:
                closed = self._closed
                await self.aclose()
                if closed:
                    raise
                raise WithRuntimeError(
                    "withruntime: the watch stream ended (the sandbox may have been stopped or paused)"
                ) from None
            except Exception as e:
                closed = self._closed
                await self.aclose()
                if closed:  # closed meanwhile: the read broke because of it
                    raise StopAsyncIteration from None
                if isinstance(e, httpx.HTTPError):
                    raise _wait.read_error(self._base_url, self._resp, e, "watch stream broke") from e
                raise
            try:
                ev = event_from_line(line)
            except WithRuntimeError:
                await self.aclose()
                raise
            if ev is not None:
                return ev

    def __aiter__(self) -> AsyncFileWatch:
        return self

    async def __anext__(self) -> WatchEvent:
        return await self._read()

    @property
    def closed(self) -> bool:
        """Whether the watch was stopped or has ended."""
        return self._closed

    async def aclose(self) -> None:
        """Stops the watch (the server stops watching). Safe to call more
        than once."""
        self._closed = True
        await self._resp.aclose()

    async def __aenter__(self) -> AsyncFileWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
