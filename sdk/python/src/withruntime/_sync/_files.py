# GENERATED from withruntime/_async/_files.py by sdk/python/scripts/generate.sh (unasync); do not edit.
# Change the async source and run sdk/python/scripts/generate.sh to regenerate.
"""The file API of a sandbox (``sbx.files``): Files and AsyncFiles, over
FileTransfer and AsyncFileTransfer (downloads, uploads and listings, which a
volume's files share: ``_volumes.py``); ``_sync/_files.py`` is generated
from ``_async/_files.py`` (see _client.py). A download's reader is
flavour-specific and hand-written: FileReader (a binary file object) in
_io_sync.py, AsyncFileReader (``async for``) in _io_async.py."""

from __future__ import annotations

import builtins
import io
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from .. import _files, _http
from .. import _io_sync as _io
from .._io_sync import FileReader
from ..errors import NotFoundError, RangeNotSatisfiableError, WithRuntimeError
from ..types import MAX_LIST_LIMIT, FileInfo, FileListPage
from ..watch import watch_params
from ._watch import FileWatch

if TYPE_CHECKING:
    from ._base import SandboxHandle

__all__ = ["Files", "FileTransfer"]


class FileTransfer:
    """Downloads, uploads and listings over a file API: a sandbox's
    (:class:`Files`) or a volume's (:class:`VolumeFiles`), whose routes are
    the same under their handle's path (``.../files``, ``.../files/list``)."""

    def __init__(self, handle: SandboxHandle) -> None:
        self._s = handle

    def _at_end(self, path: str, offset: int) -> bool:
        """Whether ``offset`` is the size of the file at ``path`` (a read
        from there gives nothing rather than RangeNotSatisfiableError)."""
        return False

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
            if offset and self._at_end(path, offset):
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
            for chunk in _io.chunks(f):
                _io.resolve(dst.write(chunk))
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
        return (self.read_file(path)).decode(encoding, errors)

    # writing

    def write(self, path: str, src: _http.UploadSource) -> FileInfo:
        """Writes the file at ``path``, streaming ``src``: bytes, text
        (UTF-8), a binary file object (read in chunks) or an iterable of byte
        chunks. Missing parent directories are created. The upload goes to a
        temporary file renamed into place at the end, so a failed upload
        leaves nothing behind. Returns the file's new description."""
        content, hdrs = _io.upload_content(src)
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

    # listing

    def _list_page(self, path: str, q: builtins.list[tuple[str, str]], cursor: str | None) -> FileListPage:
        page = FileListPage.from_dict(self._s._client._json("GET", self._s._path("/files/list"), params=q) or {})
        _files.check_page(path, page, cursor)
        return page

    def _list_all(self, path: str, depth: int) -> builtins.list[FileInfo]:
        out: builtins.list[FileInfo] = []
        cursor, read = None, 0
        while True:
            page = self._page(path, depth, MAX_LIST_LIMIT, cursor)
            out.extend(page.entries)
            if not page.truncated:
                return out
            read += _files.page_bytes(page)
            if read > _files.MAX_LIST_BYTES:
                raise _files.over_list_cap(path, len(out))
            cursor = page.next

    def _entries(self, path: str, depth: int) -> Iterator[FileInfo]:
        cursor = None
        while True:
            page = self._page(path, depth, MAX_LIST_LIMIT, cursor)
            for e in page.entries:
                yield e
            if not page.truncated:
                return
            cursor = page.next

    def _page(self, path: str, depth: int, limit: int | None, cursor: str | None) -> FileListPage:
        q = _files.list_params(path, depth, limit, cursor)
        return self._list_page(path, q, cursor)


class Files(FileTransfer):
    """The file API of one sandbox (``sbx.files``). Paths are absolute inside
    the sandbox, or relative to ``/workspace``. Raises NotFoundError (no such
    file or parent), BadRequestError (a directory where a file is wanted, or
    the reverse), ConflictError, TooLargeError, NoSpaceError, and
    LeaseEndedError / SandboxStoppedError. The async one's methods are
    awaited; its :meth:`open` gives an AsyncFileReader (``async for``), its
    :meth:`entries` is ``async for``, and ``dst.write`` and upload sources
    may be async."""

    def _at_end(self, path: str, offset: int) -> bool:
        return (self.stat(path)).size == offset

    # directories and metadata

    def list(self, path: str = "", depth: int = 1) -> builtins.list[FileInfo]:
        """Lists a directory (default /workspace) to ``depth`` levels (1: its
        direct children; at most 10), every entry, in listing order: by path
        compared one component at a time (a directory, then its contents,
        then its next sibling; at depth 1, by name). It follows the server's
        pages (:meth:`list_page`) to the last, holding at most about 256 MiB
        of entries; walk a larger listing with :meth:`entries`."""
        return self._list_all(path, depth)

    def list_page(
        self, path: str = "", depth: int = 1, limit: int | None = None, cursor: str | None = None
    ) -> FileListPage:
        """One page of a directory's listing: at most ``limit`` entries
        (None: the server's default, 1000; at most 10000), from the start
        or, with ``cursor`` (the ``next`` of the page before), strictly after
        the page before. Raises BadRequestError for a cursor no listing
        gave, a depth or limit out of range, or a path that is not a
        directory."""
        return self._page(path, depth, limit, cursor)

    def entries(self, path: str = "", depth: int = 1) -> Iterator[FileInfo]:
        """Every entry of a directory's listing (as :meth:`list`), fetched a
        page of 10000 at a time as the iteration goes, so a directory of any
        size is walked in bounded memory."""
        return self._entries(path, depth)

    def stat(self, path: str) -> FileInfo:
        """Describes one path (a symlink itself, not its target)."""
        return FileInfo.from_dict(
            self._s._client._json("GET", self._s._path("/files/stat"), params=self._q(path))
        )

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

    # watching

    @_io.context_factory
    def watch(self, path: str = "", recursive: bool = False) -> FileWatch:
        """Watches the directory ``path`` (absolute, or relative to
        /workspace; ``""`` for /workspace) and, with ``recursive``, every
        directory under it, and returns once the watch is in place: every
        change made after it returns is reported, however short-lived, from
        inotify inside the sandbox (see :mod:`withruntime.watch`)::

            with sbx.files.watch("data", recursive=True) as w:
                for ev in w:
                    if ev.type == "rename":
                        print(ev.old_path, "->", ev.path)

        (async: ``async with sbx.files.watch(...) as w`` and ``async for``,
        or ``w = await sbx.files.watch(...)``.) Stop it with ``close()``
        (``aclose()``) or the ``with`` block. Raises NotFoundError (no such
        directory), BadRequestError (not a directory; a recursive tree of
        more than 8192 directories), LeaseEndedError /
        SandboxStoppedError."""
        c = self._s._client
        resp = c._send(
            "GET", self._s._path("/files/watch"), params=watch_params(path, recursive), accept=_http.NDJSON, stream=True
        )
        w = FileWatch(c.base_url, resp)
        try:
            w._start()
        except BaseException:
            w.close()
            raise
        return w
