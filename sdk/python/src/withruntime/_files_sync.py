"""The synchronous file API: Files (``sbx.files``) and FileReader (a
download). Kept apart from _sync.py, which is about clients, sandboxes and
commands."""

from __future__ import annotations

import builtins
import io
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

import httpx

from . import _files, _http, _wait
from .errors import NotFoundError, RangeNotSatisfiableError, WithRuntimeError
from .types import MAX_LIST_LIMIT, FileInfo, FileListPage

if TYPE_CHECKING:
    from ._sync import Sandbox

__all__ = ["Files", "FileReader"]


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
        cl = "0" if resp is None else resp.headers.get("Content-Length")
        size = max(int(cl) - skip, 0) if cl and cl.isdigit() else None
        if size is not None and limit is not None:
            size = min(size, limit)
        #: The number of bytes this reader gives (the file's size for a
        #: whole download) when the server said it, else None.
        self.size: int | None = size

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


class Files:
    """The file API of one sandbox (``sbx.files``). Paths are absolute inside
    the sandbox, or relative to ``/workspace``. Raises NotFoundError (no such
    file or parent), BadRequestError (a directory where a file is wanted, or
    the reverse), ConflictError, TooLargeError, NoSpaceError, and
    LeaseEndedError / SandboxStoppedError."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._s = sandbox

    def _q(self, path: str, **extra: str) -> list[tuple[str, str]]:
        return [("path", path), *extra.items()]

    # reading

    def open(self, path: str, offset: int = 0, length: int | None = None) -> FileReader:
        """Opens a regular file for streaming download: ``length`` bytes
        (None: to the end) from ``offset``, asked for with a Range request,
        so an interrupted download resumes where it stopped::

            with open("big.bin", "ab") as out:
                sbx.files.read("big.bin", out, offset=out.tell())

        An offset at the file's end gives nothing; one past it raises
        RangeNotSatisfiableError. A file the server sends whole (one that
        reports size 0, such as those in /proc) has its first ``offset``
        bytes skipped here, so the bytes are the same either way."""
        hdrs = _files.range_header(path, offset, length)
        try:
            resp = self._s._client._send(
                "GET",
                self._s._path("/files"),
                params=self._q(path),
                accept=_http.OCTET,
                extra_headers=hdrs,
                stream=True,
            )
        except RangeNotSatisfiableError:
            if offset and self.stat(path).size == offset:
                return FileReader(None, path)  # at the end: nothing left
            raise
        try:
            skip, limit = _files.skip_and_limit(resp.headers, resp.status_code, path, offset, length)
        except WithRuntimeError:
            resp.close()
            raise
        return FileReader(resp, path, skip, limit)

    def read(self, path: str, dst: IO[bytes], offset: int = 0, length: int | None = None) -> int:
        """Downloads a regular file (or ``length`` bytes of it from
        ``offset``, as :meth:`open`) into the binary file object ``dst``,
        one chunk at a time, and returns the number of bytes written."""
        n = 0
        with self.open(path, offset, length) as f:
            for chunk in f.chunks():
                dst.write(chunk)
                n += len(chunk)
        return n

    def read_file(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        """A regular file's whole content (or ``length`` bytes of it from
        ``offset``, as :meth:`open`)."""
        buf = io.BytesIO()
        self.read(path, buf, offset, length)
        return buf.getvalue()

    def read_bytes(self, path: str) -> bytes:
        """Same as :meth:`read_file`."""
        return self.read_file(path)

    def read_text(self, path: str, encoding: str = "utf-8", errors: str = "strict") -> str:
        """A regular file's whole content, decoded."""
        return self.read_file(path).decode(encoding, errors)

    # writing

    def write(self, path: str, src: _http.UploadSource) -> FileInfo:
        """Writes the file at ``path``, streaming ``src``: bytes, text
        (UTF-8), a binary file object (read in chunks) or an iterable of byte
        chunks. Missing parent directories are created. The upload goes to a
        temporary file renamed into place at the end, so a failed upload
        leaves nothing behind. Returns the file's new description."""
        content, hdrs = _http.upload_content(src)
        resp = self._s._client._send(
            "PUT",
            self._s._path("/files"),
            params=self._q(path),
            content=content,
            content_type=_http.OCTET,
            extra_headers=hdrs,
        )
        return FileInfo.from_dict(resp.json())

    def write_file(self, path: str, data: bytes | bytearray | memoryview | str) -> FileInfo:
        """Writes ``data`` (bytes, or text as UTF-8) to the file at ``path``."""
        return self.write(path, data)

    def write_bytes(self, path: str, data: bytes | bytearray | memoryview) -> FileInfo:
        """Same as :meth:`write_file`."""
        return self.write(path, data)

    def write_text(self, path: str, text: str, encoding: str = "utf-8") -> FileInfo:
        """Writes ``text`` to the file at ``path`` in ``encoding``."""
        return self.write(path, text.encode(encoding))

    # directories and metadata

    def list(self, path: str = "", depth: int = 1) -> builtins.list[FileInfo]:
        """Lists a directory (default /workspace) to ``depth`` levels (1: its
        direct children; at most 10), every entry, in listing order: by path
        compared one component at a time (a directory, then its contents,
        then its next sibling; at depth 1, by name). It follows the server's
        pages (:meth:`list_page`) to the last, holding at most about 256 MiB
        of entries; walk a larger listing with :meth:`entries`."""
        out: builtins.list[FileInfo] = []
        cursor, read = None, 0
        while True:
            page = self.list_page(path, depth, limit=MAX_LIST_LIMIT, cursor=cursor)
            out.extend(page.entries)
            if not page.truncated:
                return out
            read += _files.page_bytes(page)
            if read > _files.MAX_LIST_BYTES:
                raise _files.over_list_cap(path, len(out))
            cursor = page.next

    def list_page(
        self, path: str = "", depth: int = 1, limit: int | None = None, cursor: str | None = None
    ) -> FileListPage:
        """One page of a directory's listing: at most ``limit`` entries
        (None: the server's default, 1000; at most 10000), from the start
        or, with ``cursor`` (the ``next`` of the page before), strictly after
        the page before. Raises BadRequestError for a cursor no listing
        gave, a depth or limit out of range, or a path that is not a
        directory."""
        q = _files.list_params(path, depth, limit, cursor)
        page = FileListPage.from_dict(self._s._client._json("GET", self._s._path("/files/list"), params=q) or {})
        _files.check_page(path, page, cursor)
        return page

    def entries(self, path: str = "", depth: int = 1) -> Iterator[FileInfo]:
        """Every entry of a directory's listing (as :meth:`list`), fetched a
        page of 10000 at a time as the iteration goes, so a directory of any
        size is walked in bounded memory."""
        cursor = None
        while True:
            page = self.list_page(path, depth, limit=MAX_LIST_LIMIT, cursor=cursor)
            yield from page.entries
            if not page.truncated:
                return
            cursor = page.next

    def stat(self, path: str) -> FileInfo:
        """Describes one path (a symlink itself, not its target)."""
        return FileInfo.from_dict(self._s._client._json("GET", self._s._path("/files/stat"), params=self._q(path)))

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists."""
        try:
            self.stat(path)
        except NotFoundError:
            return False
        return True

    def remove(self, path: str) -> None:
        """Removes a file, a symlink or an empty directory."""
        self._s._client._send("DELETE", self._s._path("/files"), params=self._q(path))

    def remove_all(self, path: str) -> None:
        """Removes ``path`` and, if it is a directory, everything in it."""
        self._s._client._send("DELETE", self._s._path("/files"), params=self._q(path, recursive="true"))

    def mkdir(self, path: str, parents: bool = False) -> FileInfo:
        """Creates a directory owned by the sandbox user; with ``parents``,
        also missing parents, and an existing directory is fine (mkdir -p)."""
        body: dict[str, Any] = {"path": path}
        if parents:
            body["parents"] = True
        return FileInfo.from_dict(self._s._client._json("POST", self._s._path("/files/mkdir"), body))

    def mkdir_all(self, path: str) -> FileInfo:
        """``mkdir(path, parents=True)``."""
        return self.mkdir(path, parents=True)

    def rename(self, src: str, dst: str) -> FileInfo:
        """Moves ``src`` to ``dst``, replacing ``dst`` if it is a file and
        creating its missing parents; returns ``dst``'s description."""
        return FileInfo.from_dict(
            self._s._client._json("POST", self._s._path("/files/rename"), {"from": src, "to": dst})
        )
