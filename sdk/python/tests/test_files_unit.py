"""The file API's helpers, without a server: Range headers, trimming a
whole-file answer to a range, and listing pages."""

from __future__ import annotations

import pytest

from withruntime import FileListPage, WithRuntimeError
from withruntime._files import check_page, list_params, range_header, skip_and_limit, trim


def test_range_header() -> None:
    assert range_header("p", 0, None) == {}
    assert range_header("p", 10, None) == {"Range": "bytes=10-"}
    assert range_header("p", 0, 100) == {"Range": "bytes=0-99"}
    assert range_header("p", 5, 0) == {"Range": "bytes=5-5"}
    with pytest.raises(ValueError):
        range_header("p", -1, None)
    with pytest.raises(ValueError):
        range_header("p", 0, -5)


def test_trim_whole_file_to_a_range() -> None:
    chunks = [b"0123", b"4567", b"89"]
    assert b"".join(trim(iter(chunks), 0, None)) == b"0123456789"
    assert b"".join(trim(iter(chunks), 5, None)) == b"56789"
    assert b"".join(trim(iter(chunks), 3, 4)) == b"3456"
    assert b"".join(trim(iter(chunks), 4, 0)) == b""
    assert b"".join(trim(iter(chunks), 20, None)) == b""


def test_skip_and_limit() -> None:
    assert skip_and_limit({"Content-Range": "bytes 10-19/100"}, 206, "p", 10, 10) == (0, 10)
    assert skip_and_limit({}, 200, "p", 10, None) == (10, None)
    with pytest.raises(WithRuntimeError):
        skip_and_limit({"Content-Range": "bytes 0-19/100"}, 206, "p", 10, None)
    with pytest.raises(WithRuntimeError):
        skip_and_limit({}, 206, "p", 10, None)


def test_pages() -> None:
    assert list_params("", 0, None, None) == [("path", "/workspace"), ("depth", "1")]
    assert list_params("d", 2, 50, "abc") == [("path", "d"), ("depth", "2"), ("limit", "50"), ("cursor", "abc")]
    page = FileListPage.from_dict(
        {"entries": [{"name": "a", "path": "/w/a"}], "truncated": True, "next": "L3cvYQ", "total": 7}
    )
    assert page.truncated and page.next == "L3cvYQ" and page.total == 7 and page.entries[0].name == "a"
    assert FileListPage.from_dict({"entries": [], "truncated": False}).total is None
    check_page("d", page, None)
    with pytest.raises(WithRuntimeError):
        check_page("d", page, "L3cvYQ")  # the same cursor again
    with pytest.raises(WithRuntimeError):
        check_page("d", FileListPage([], True, "x", None), None)  # truncated yet empty
