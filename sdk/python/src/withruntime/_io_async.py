"""The asyncio side of the few things the two clients do differently
(hand-written; :mod:`withruntime._io_sync` has the same names for the
synchronous client). The async client in ``_async/`` imports this module as
``_io``; the generator turns that import into one of ``_io_sync``, so every
name here has a twin there. See scripts/generate.py."""

from __future__ import annotations

import asyncio
import functools
import inspect
import io
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Iterator
from types import TracebackType
from typing import Any, BinaryIO, Generic, ParamSpec, TypeVar

import httpx
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as _ws_connect

from . import _files, _http, _wait

T = TypeVar("T")
P = ParamSpec("P")

#: The lock of a sandbox handle's kill.
Lock = asyncio.Lock

#: A terminal's finished-reading flag.
Event = asyncio.Event

#: A terminal's WebSocket (the websockets package's asyncio client).
WebSocket = ClientConnection


async def ws_connect(url: str, headers: dict[str, str], *, max_size: int, open_timeout: float | None) -> WebSocket:
    """Opens a WebSocket (a terminal's): no compression, as the server
    offers none; ``open_timeout`` bounds the handshake (None: no bound)."""
    return await _ws_connect(
        url,
        additional_headers=headers,
        compression=None,
        max_size=max_size,
        open_timeout=open_timeout,
        user_agent_header=headers.get("User-Agent"),
    )


def spawn(fn: Callable[[], Coroutine[Any, Any, None]]) -> asyncio.Task[None]:
    """Runs ``fn()`` beside the caller (a terminal's reader): a task of the
    running loop; the sync twin, a daemon thread."""
    return asyncio.get_running_loop().create_task(fn())


async def wait_event(ev: asyncio.Event, timeout: float | None) -> bool:
    """Waits for ``ev`` at most ``timeout`` seconds (None: no bound);
    whether it is set."""
    if timeout is None:
        await ev.wait()
        return True
    try:
        await asyncio.wait_for(ev.wait(), timeout)
    except TimeoutError:
        return False
    return True


class AwaitableContext(Generic[T]):
    """What AsyncSandbox.create and connect return: await it for the
    sandbox, or use it directly in ``async with``."""

    def __init__(self, make: Callable[[], Awaitable[T]]) -> None:
        self._make = make
        self._value: T | None = None

    def __await__(self) -> Generator[Any, None, T]:
        return self._make().__await__()

    async def __aenter__(self) -> T:
        self._value = await self._make()
        return await self._value.__aenter__()  # type: ignore[attr-defined,no-any-return]

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._value is not None
        await self._value.__aexit__(exc_type, exc, tb)  # type: ignore[attr-defined]


def context_factory(f: Callable[P, Awaitable[T]]) -> Callable[P, AwaitableContext[T]]:
    """Makes a coroutine function's call awaitable or usable in ``async
    with`` (the sync twin returns the function as it is: its answer is a
    context manager already)."""

    @functools.wraps(f)
    def call(*args: P.args, **kwargs: P.kwargs) -> AwaitableContext[T]:
        return AwaitableContext(lambda: f(*args, **kwargs))

    return call


async def resolve(v: Any) -> Any:
    """``v``, awaited if it is awaitable: what a handler or a file's
    ``write`` returned, which may be a coroutine here."""
    if inspect.isawaitable(v):
        return await v
    return v


async def in_thread(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Runs blocking work (reading local files) in a worker thread."""
    return await asyncio.to_thread(fn, *args, **kwargs)


async def thread_chunks(it: Iterator[bytes]) -> AsyncIterator[bytes]:
    """Reads a sync chunk stream (files on disk) in a worker thread."""
    while True:
        chunk = await asyncio.to_thread(next, it, None)
        if chunk is None:
            return
        yield chunk


def file_source(f: BinaryIO) -> AsyncIterator[bytes]:
    """A local file to upload, read in chunks in a worker thread."""
    return thread_chunks(iter(lambda: f.read(_http.CHUNK_SIZE), b""))


def upload_content(src: Any) -> tuple[Any, dict[str, str]]:
    """:func:`withruntime._http.upload_content` for the async client (async
    file objects and iterables too)."""
    return _http.upload_content(src, is_async=True)


def chunks(reader: AsyncFileReader) -> AsyncFileReader:
    """A download's chunks as they arrive (``async for``)."""
    return reader


async def _nothing() -> AsyncIterator[bytes]:
    """An empty stream of chunks."""
    return
    yield b""  # makes this an async generator


async def _trim(chunks: AsyncIterator[bytes], skip: int, limit: int | None) -> AsyncIterator[bytes]:
    """:func:`withruntime._files.trim` of an async stream."""
    t = _files.Trim(skip, limit)
    async for chunk in chunks:
        out = t.cut(chunk)
        if out is None:
            return
        if out:
            yield out


class AsyncFileReader:
    """A file being downloaded: ``async for chunk in reader``, or ``await
    reader.read()``. Use ``async with`` (or ``aclose()``)."""

    def __init__(self, resp: httpx.Response | None, path: str, skip: int = 0, limit: int | None = None) -> None:
        self._resp = resp
        self._it: AsyncIterator[bytes] = _trim(_nothing() if resp is None else resp.aiter_bytes(), skip, limit)
        self._path = path
        #: The number of bytes this reader gives (the file's size for a
        #: whole download) when the server said it, else None.
        self.size: int | None = _files.reader_size(resp, skip, limit)

    def __aiter__(self) -> AsyncFileReader:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self._it.__anext__()
        except httpx.HTTPError as e:
            assert self._resp is not None  # a reader without an answer reads nothing
            raise _wait.read_error(None, self._resp, e, f"reading {self._path}") from e

    async def read(self) -> bytes:
        """The rest of the file."""
        buf = io.BytesIO()
        async for chunk in self:
            buf.write(chunk)
        return buf.getvalue()

    async def aclose(self) -> None:
        """Disconnects the download."""
        if self._resp is not None:
            await self._resp.aclose()

    async def __aenter__(self) -> AsyncFileReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
