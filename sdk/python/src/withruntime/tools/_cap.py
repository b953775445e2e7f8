"""Keeping the head and the tail of a stream of bytes in bounded memory (a
port of the Go SDK's tools/cap.go, byte for byte)."""

from __future__ import annotations

_UTF_MAX = 4


def _rune_start(b: int) -> bool:
    return b & 0xC0 != 0x80


def _boundary_before(b: bytes, n: int) -> int:
    """The largest i <= n that starts a UTF-8 sequence in b (or len(b))."""
    if n >= len(b):
        return len(b)
    i = n
    while i > 0 and n - i < _UTF_MAX:
        if _rune_start(b[i]):
            return i
        i -= 1
    return n


def _boundary_after(b: bytes, n: int) -> int:
    """The smallest i >= n that starts a UTF-8 sequence in b."""
    if n <= 0:
        return 0
    i = n
    while i < len(b) and i - n < _UTF_MAX:
        if _rune_start(b[i]):
            return i
        i += 1
    return n


def marker(cut: int, total: int, what: str) -> str:
    return (
        f"\n[... {cut} bytes cut from the middle of {what} ({total} bytes in all); "
        "the first and last parts are shown ...]\n"
    )


class CapBuf:
    """Keeps the first limit/2 and the last limit/2 bytes written, each cut
    back to a UTF-8 boundary."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def _head_limit(self) -> int:
        return self.limit // 2

    def _tail_limit(self) -> int:
        return self.limit - self.limit // 2

    def write(self, p: bytes) -> int:
        n = len(p)
        room = self._head_limit() + _UTF_MAX - len(self.head)
        if room > 0:
            k = min(room, len(p))
            self.head += p[:k]
            p = p[k:]
        self.tail += p
        keep = self._tail_limit() + _UTF_MAX
        if len(self.tail) > 2 * keep:
            drop = len(self.tail) - keep
            self.dropped += drop
            del self.tail[:drop]
        return n

    def total(self) -> int:
        return len(self.head) + len(self.tail) + self.dropped

    def parts(self) -> tuple[bytes, bytes, int]:
        """The kept head and tail and the number of bytes cut between them
        (0 when nothing was: then tail is empty and head is everything)."""
        if self.dropped == 0:
            whole = bytes(self.head + self.tail)
            if len(whole) <= self.limit:
                return whole, b"", 0
            h = _boundary_before(whole, self._head_limit())
            t = _boundary_after(whole, len(whole) - self._tail_limit())
            return whole[:h], whole[t:], t - h
        head, tail = bytes(self.head), bytes(self.tail)
        h = _boundary_before(head, self._head_limit())
        t = _boundary_after(tail, len(tail) - self._tail_limit())
        return head[:h], tail[t:], self.total() - h - (len(tail) - t)

    def text(self, what: str) -> tuple[str, int]:
        """The kept text with a marker where bytes were cut, and the number
        of bytes cut."""
        head, tail, cut = self.parts()
        if cut == 0:
            return head.decode("utf-8", "replace"), 0
        return head.decode("utf-8", "replace") + marker(cut, self.total(), what) + tail.decode("utf-8", "replace"), cut

    def prefix(self, n: int) -> bytes:
        """The first n bytes written (or all, if fewer), n at most the head limit."""
        whole = bytes(self.head) if self.dropped else bytes(self.head + self.tail)
        return whole[: min(n, len(whole))]
