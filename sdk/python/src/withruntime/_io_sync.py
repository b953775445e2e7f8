"""The synchronous side of the few things the two clients do differently
(hand-written): the twin of :mod:`withruntime._io_async`, name for name.
The generated sync client in ``_sync/`` imports this module as ``_io``."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, ParamSpec, TypeVar

import httpx
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as _ws_connect

from . import _files, _http, _wait

T = TypeVar("T")
P = ParamSpec("P")
F = TypeVar("F", bound=Callable[..., Any])

#: The lock of a sandbox handle's kill.
Lock = threading.Lock

#: A terminal's finished-reading flag.
Event = threading.Event

#: A terminal's WebSocket (the websockets package's threaded client).
WebSocket = ClientConnection


def ws_connect(url: str, headers: dict[str, str], *, max_size: int, open_timeout: float | None) -> WebSocket:
    """Opens a WebSocket (a terminal's): no compression, as the server
    offers none; ``open_timeout`` bounds the handshake (None: no bound)."""
    ws = _ws_connect(
        url,
        additional_headers=headers,
        compression=None,
        max_size=max_size,
        open_timeout=open_timeout,
        user_agent_header=headers.get("User-Agent"),
    )
    # Entered as a context manager (it returns itself): websockets 17 warns
    # about a connection used without one; the terminal closes it itself.
    return ws.__enter__()


def spawn(fn: Callable[[], None]) -> threading.Thread:
    """Runs ``fn()`` beside the caller (a terminal's reader) in a daemon
    thread; the async twin, a task of the running loop."""
    t = threading.Thread(target=fn, daemon=True, name="withruntime-terminal")
    t.start()
    return t


def wait_event(ev: threading.Event, timeout: float | None) -> bool:
    """Waits for ``ev`` at most ``timeout`` seconds (None: no bound);
    whether it is set."""
    return ev.wait(timeout)


def context_factory(f: F) -> F:
    """``f`` as it is: a sync create or connect returns the sandbox, which
    is a context manager itself (the async twin wraps the coroutine)."""
    return f


def resolve(v: T) -> T:
    """``v`` (the async twin awaits an awaitable)."""
    return v


def in_thread(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Runs ``fn`` here (the async twin runs it in a worker thread)."""
    return fn(*args, **kwargs)


def thread_chunks(it: Iterator[bytes]) -> Iterator[bytes]:
    """``it`` (the async twin reads it in a worker thread)."""
    return it


def file_source(f: BinaryIO) -> BinaryIO:
    """A local file to upload, as it is (sent with its Content-Length)."""
    return f


#: The request content of an upload and the headers it needs.
upload_content = _http.upload_content


def chunks(reader: FileReader) -> Iterator[bytes]:
    """A download's chunks as they arrive."""
    return reader.chunks()


class FileReader(io.RawIOBase):
    """A file being downloaded from a sandbox: a readable binary file object
    (``read``, ``readinto``, usable with ``shutil.copyfileobj``) that holds
    one chunk at a time. ``chunks()`` iterates the raw chunks. Close it (or
    use ``with``) when done."""

    def __init__(self, resp: httpx.Response | None, path: str, skip: int = 0, limit: int | None = None) -> None:
        super().__init__()
        self._resp = resp
        self._it: Iterator[bytes] = iter(()) if resp is None else _files.trim(resp.iter_bytes(), skip, limit)
        self._buf = b""
        self._path = path
        #: The number of bytes this reader gives (the file's size for a
        #: whole download) when the server said it, else None.
        self.size: int | None = _files.reader_size(resp, skip, limit)

    @property
    def name(self) -> str:
        return self._path

    def readable(self) -> bool:
        return True

    def _next_chunk(self) -> bytes:
        try:
            return next(self._it, b"")
        except httpx.HTTPError as e:
            assert self._resp is not None  # a reader without an answer reads nothing
            raise _wait.read_error(None, self._resp, e, f"reading {self._path}") from e

    def readinto(self, b: Any) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if not self._buf:
            self._buf = self._next_chunk()
            if not self._buf:
                return 0
        mv = memoryview(b).cast("B")
        n = min(len(mv), len(self._buf))
        mv[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def chunks(self) -> Iterator[bytes]:
        """The file's bytes, chunk by chunk, as they arrive."""
        if self._buf:
            buf, self._buf = self._buf, b""
            yield buf
        while True:
            chunk = self._next_chunk()
            if not chunk:
                return
            yield chunk

    def close(self) -> None:
        if not self.closed and self._resp is not None:
            self._resp.close()
        super().close()

    def __enter__(self) -> FileReader:
        return self
