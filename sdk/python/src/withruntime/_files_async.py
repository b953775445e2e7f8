"""The asyncio file API: AsyncFiles (``sbx.files``) and AsyncFileReader
(a download), the twins of _files_sync.py."""

from __future__ import annotations

import builtins
import io
from collections.abc import AsyncIterator
from typing import IO, TYPE_CHECKING, Any

import httpx

from . import _files, _http, _wait
from .errors import NotFoundError, RangeNotSatisfiableError, WithRuntimeError
from .types import MAX_LIST_LIMIT, FileInfo, FileListPage

if TYPE_CHECKING:
    from ._async import AsyncSandbox

__all__ = ["AsyncFiles", "AsyncFileReader"]


async def _nothing() -> AsyncIterator[bytes]:
    """An empty stream of chunks."""
    return
    yield b""  # makes this an async generator


class AsyncFileReader:
    """A file being downloaded: ``async for chunk in reader``, or ``await
    reader.read()``. Use ``async with`` (or ``aclose()``)."""

    def __init__(self, resp: httpx.Response | None, path: str, skip: int = 0, limit: int | None = None) -> None:
        self._resp = resp
        self._it: AsyncIterator[bytes] = _files.atrim(_nothing() if resp is None else resp.aiter_bytes(), skip, limit)
        self._path = path
        cl = "0" if resp is None else resp.headers.get("Content-Length")
        size = max(int(cl) - skip, 0) if cl and cl.isdigit() else None
        if size is not None and limit is not None:
            size = min(size, limit)
        #: The number of bytes this reader gives (the file's size for a
        #: whole download) when the server said it, else None.
        self.size: int | None = size

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
        if self._resp is not None:
            await self._resp.aclose()

    async def __aenter__(self) -> AsyncFileReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncFiles:
    """The asyncio twin of :class:`~withruntime.Files` (``sbx.files``)."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._s = sandbox

    async def open(self, path: str, offset: int = 0, length: int | None = None) -> AsyncFileReader:
        """Opens a regular file for streaming download: ``length`` bytes
        (None: to the end) from ``offset`` (see
        :meth:`withruntime.Files.open`)."""
        hdrs = _files.range_header(path, offset, length)
        try:
            resp = await self._s._client._send(
                "GET",
                self._s._path("/files"),
                params=[("path", path)],
                accept=_http.OCTET,
                extra_headers=hdrs,
                stream=True,
            )
        except RangeNotSatisfiableError:
            if offset and (await self.stat(path)).size == offset:
                return AsyncFileReader(None, path)  # at the end: nothing left
            raise
        try:
            skip, limit = _files.skip_and_limit(resp.headers, resp.status_code, path, offset, length)
        except WithRuntimeError:
            await resp.aclose()
            raise
        return AsyncFileReader(resp, path, skip, limit)

    async def read(self, path: str, dst: IO[bytes], offset: int = 0, length: int | None = None) -> int:
        """Downloads a file (or ``length`` bytes of it from ``offset``) into
        the binary file object ``dst`` (its ``write`` may also be a
        coroutine function), chunk by chunk."""
        n = 0
        async with await self.open(path, offset, length) as f:
            async for chunk in f:
                r = dst.write(chunk)
                if hasattr(r, "__await__"):
                    await r
                n += len(chunk)
        return n

    async def read_file(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        async with await self.open(path, offset, length) as f:
            return await f.read()

    async def read_bytes(self, path: str) -> bytes:
        return await self.read_file(path)

    async def read_text(self, path: str, encoding: str = "utf-8", errors: str = "strict") -> str:
        return (await self.read_file(path)).decode(encoding, errors)

    async def write(self, path: str, src: _http.AsyncUploadSource) -> FileInfo:
        """Writes the file at ``path``, streaming ``src``: bytes, text, a
        binary file object (sync or async ``read``), or a sync or async
        iterable of byte chunks."""
        content, hdrs = _http.upload_content(src, is_async=True)
        resp = await self._s._client._send(
            "PUT",
            self._s._path("/files"),
            params=[("path", path)],
            content=content,
            content_type=_http.OCTET,
            extra_headers=hdrs,
        )
        return FileInfo.from_dict(resp.json())

    async def write_file(self, path: str, data: bytes | bytearray | memoryview | str) -> FileInfo:
        return await self.write(path, data)

    async def write_bytes(self, path: str, data: bytes | bytearray | memoryview) -> FileInfo:
        return await self.write(path, data)

    async def write_text(self, path: str, text: str, encoding: str = "utf-8") -> FileInfo:
        return await self.write(path, text.encode(encoding))

    async def list(self, path: str = "", depth: int = 1) -> builtins.list[FileInfo]:
        """Every entry of a directory's listing, following the server's
        pages (see :meth:`withruntime.Files.list`)."""
        out: builtins.list[FileInfo] = []
        cursor, read = None, 0
        while True:
            page = await self.list_page(path, depth, limit=MAX_LIST_LIMIT, cursor=cursor)
            out.extend(page.entries)
            if not page.truncated:
                return out
            read += _files.page_bytes(page)
            if read > _files.MAX_LIST_BYTES:
                raise _files.over_list_cap(path, len(out))
            cursor = page.next

    async def list_page(
        self, path: str = "", depth: int = 1, limit: int | None = None, cursor: str | None = None
    ) -> FileListPage:
        """One page of a directory's listing (see
        :meth:`withruntime.Files.list_page`)."""
        q = _files.list_params(path, depth, limit, cursor)
        page = FileListPage.from_dict(await self._s._client._json("GET", self._s._path("/files/list"), params=q) or {})
        _files.check_page(path, page, cursor)
        return page

    async def entries(self, path: str = "", depth: int = 1) -> AsyncIterator[FileInfo]:
        """Every entry of a directory's listing, a page at a time (``async
        for``; see :meth:`withruntime.Files.entries`)."""
        cursor = None
        while True:
            page = await self.list_page(path, depth, limit=MAX_LIST_LIMIT, cursor=cursor)
            for e in page.entries:
                yield e
            if not page.truncated:
                return
            cursor = page.next

    async def stat(self, path: str) -> FileInfo:
        return FileInfo.from_dict(
            await self._s._client._json("GET", self._s._path("/files/stat"), params=[("path", path)])
        )

    async def exists(self, path: str) -> bool:
        try:
            await self.stat(path)
        except NotFoundError:
            return False
        return True

    async def remove(self, path: str) -> None:
        await self._s._client._send("DELETE", self._s._path("/files"), params=[("path", path)])

    async def remove_all(self, path: str) -> None:
        await self._s._client._send("DELETE", self._s._path("/files"), params=[("path", path), ("recursive", "true")])

    async def mkdir(self, path: str, parents: bool = False) -> FileInfo:
        body: dict[str, Any] = {"path": path}
        if parents:
            body["parents"] = True
        return FileInfo.from_dict(await self._s._client._json("POST", self._s._path("/files/mkdir"), body))

    async def mkdir_all(self, path: str) -> FileInfo:
        return await self.mkdir(path, parents=True)

    async def rename(self, src: str, dst: str) -> FileInfo:
        return FileInfo.from_dict(
            await self._s._client._json("POST", self._s._path("/files/rename"), {"from": src, "to": dst})
        )
