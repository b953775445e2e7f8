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


def test_list_tool_shows_500_and_the_total() -> None:
    from withruntime import FileInfo
    from withruntime.tools._run import list_result

    entries = [FileInfo(f"f{i:05d}", f"/w/f{i:05d}", "file", 0, "0644", None, 1000, 1000) for i in range(500)]
    res = list_result("/w", FileListPage(entries, True, "x", 60000))
    lines = res["text"].split("\n")
    assert lines[0] == "/w: 60000 entries; the first 500 (by name) are shown"
    assert len(lines) == 502 and lines[1].endswith("  f00000") and lines[500].endswith("  f00499")
    assert lines[501] == "[... 59500 more entries not shown; use runtime_exec with ls or find to see them ...]"
    assert res["data"]["total"] == 60000 and res["data"]["truncated"] is True and len(res["data"]["entries"]) == 500
    small = list_result("/w", FileListPage(entries[:2], False, "", 2))
    assert small["text"].split("\n")[0] == "/w: 2 entries" and small["data"]["truncated"] is False
