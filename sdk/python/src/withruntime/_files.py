"""Helpers shared by the sync and async file APIs: ranged downloads and
listing pages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .errors import WithRuntimeError
from .types import FileListPage


def range_header(path: str, offset: int, length: int | None) -> dict[str, str]:
    """The Range header of a download of ``length`` bytes (None: to the
    end) from ``offset``; none for the whole file."""
    if offset < 0:
        raise ValueError(f"withruntime: reading {path}: offset {offset} is negative; give a byte offset from 0")
    if length is not None and length < 0:
        raise ValueError(f"withruntime: reading {path}: length {length} is negative; give None to read to the end")
    if offset == 0 and length is None:
        return {}
    # A length of 0 still asks for one byte (a range cannot be empty); the
    # reader gives none of it.
    last = "" if length is None else str(offset + max(length, 1) - 1)
    return {"Range": f"bytes={offset}-{last}"}


def skip_and_limit(headers: Any, status: int, path: str, offset: int, length: int | None) -> tuple[int, int | None]:
    """What to drop from the head of an answer and how much to keep: a 206
    must start at ``offset`` (nothing to drop); a whole file (200, from a
    server that ignored the Range, or a file that reports size 0) has its
    first ``offset`` bytes dropped here."""
    if status == 206:
        cr = headers.get("Content-Range", "")
        first = cr.removeprefix("bytes ").split("-", 1)[0]
        if not cr.startswith("bytes ") or not first.isdigit() or int(first) != offset:
            raise WithRuntimeError(f"withruntime: reading {path}: the answer holds {cr!r}, not bytes from {offset}")
        return 0, length
    return offset, length


class Trim:
    """Cuts a stream of chunks: drops its first ``skip`` bytes and stops
    after ``limit`` more (None: no limit). Both flavours of download use it."""

    def __init__(self, skip: int, limit: int | None) -> None:
        self.skip = skip
        self.limit = limit

    def cut(self, chunk: bytes) -> bytes | None:
        """The part of ``chunk`` to give (empty when all of it is skipped);
        None once the limit is reached."""
        if self.skip:
            if len(chunk) <= self.skip:
                self.skip -= len(chunk)
                return b""
            chunk, self.skip = chunk[self.skip :], 0
        if self.limit is not None:
            if self.limit <= 0:
                return None
            chunk = chunk[: self.limit]
            self.limit -= len(chunk)
        return chunk


def trim(chunks: Iterator[bytes], skip: int, limit: int | None) -> Iterator[bytes]:
    """``chunks`` without its first ``skip`` bytes, cut after ``limit``."""
    t = Trim(skip, limit)
    for chunk in chunks:
        out = t.cut(chunk)
        if out is None:
            return
        if out:
            yield out


def list_params(path: str, depth: int, limit: int | None, cursor: str | None) -> list[tuple[str, str]]:
    """The query of GET .../files/list."""
    q = [("path", path or "/workspace"), ("depth", str(max(int(depth), 1)))]
    if limit is not None:
        q.append(("limit", str(int(limit))))
    if cursor:
        q.append(("cursor", cursor))
    return q


#: What ``files.list`` holds at most, about (the JSON size of its entries):
#: the pages come from inside the sandbox.
MAX_LIST_BYTES = 256 << 20


def check_page(path: str, page: FileListPage, cursor: str | None) -> None:
    """Refuses a page that does not move the listing forward."""
    if page.truncated and (not page.entries or not page.next or page.next == cursor):
        raise WithRuntimeError(
            f"withruntime: listing {path}: a page that does not move the listing forward "
            "(was the sandbox's agent replaced from inside?)"
        )


def page_bytes(page: FileListPage) -> int:
    """About the JSON size of a page's entries."""
    return sum(len(e.path) + len(e.name) + len(e.target) + 128 for e in page.entries)


def over_list_cap(path: str, n: int) -> WithRuntimeError:
    """The error of a listing past :data:`MAX_LIST_BYTES`."""
    return WithRuntimeError(
        f"withruntime: listing {path}: over {n} entries, more than list() holds; walk it with files.entries()"
    )


def reader_size(resp: Any, skip: int, limit: int | None) -> int | None:
    """How many bytes a download gives, when the server said (its
    Content-Length less what is skipped, at most ``limit``); else None."""
    cl = "0" if resp is None else resp.headers.get("Content-Length")
    size = max(int(cl) - skip, 0) if cl and cl.isdigit() else None
    if size is not None and limit is not None:
        size = min(size, limit)
    return size
