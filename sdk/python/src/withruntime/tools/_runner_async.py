"""Runs one tool call in a sandbox: the async runner, written by hand;
``_runner_sync.py`` is generated from it by ``sdk/python/scripts/generate.sh``
(unasync). The arguments are checked already; every failure the model should
see is an answer, not an exception."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import _io_async as _io
from ..errors import WithRuntimeError
from . import _code, _run
from ._cap import CapBuf
from ._code import RUN_CODE_NAME
from ._run import (
    EXEC_NAME,
    MAX_LIST_ENTRIES,
    MAX_OUTPUT_BYTES,
    MAX_READ_BYTES,
    READ_FILE_NAME,
    WRITE_FILE_NAME,
)

if TYPE_CHECKING:
    from .._async import AsyncSandbox


async def run(name: str, sbx: AsyncSandbox, s: dict[str, str], n: dict[str, int]) -> dict[str, Any]:
    if name == RUN_CODE_NAME:
        try:
            ex = await sbx.run_code(
                s["code"],
                language=_code.CODE_LANGUAGES[s.get("language", "").lower()] or None,
                timeout_seconds=_code.CODE_TIMEOUT_SECONDS,
            )
        except WithRuntimeError as e:
            return _code.run_error(e)
        return _code.code_result(ex)
    if name == EXEC_NAME:
        command, cwd, timeout = _run.exec_plan(s, n)
        out, err = CapBuf(MAX_OUTPUT_BYTES), CapBuf(MAX_OUTPUT_BYTES)
        try:
            stream = sbx.exec_stream(command, cwd=cwd, timeout_seconds=float(timeout))
            async with stream:
                async for ev in stream:
                    if ev.type == "stdout":
                        out.write(ev.data.encode("utf-8", "replace"))
                    elif ev.type == "stderr":
                        err.write(ev.data.encode("utf-8", "replace"))
        except WithRuntimeError as e:
            return _run.exec_error(e)
        return _run.exec_result(stream.result, out, err, cwd, timeout)
    if name == READ_FILE_NAME:
        p = _run.resolve(s["path"])
        try:
            fi = await sbx.files.stat(p)
        except WithRuntimeError as e:
            return _run.api_result(e, "runtime_list_files shows a directory's contents")
        refused = _run.read_stat_result(p, fi)
        if refused is not None:
            return refused
        try:
            reader = await sbx.files.open(p)
        except WithRuntimeError as e:
            return _run.api_result(e, "")
        buf, got, scan = CapBuf(MAX_READ_BYTES), 0, _run.read_scan_limit(fi)
        try:
            async with reader:
                async for chunk in _io.chunks(reader):
                    take = min(len(chunk), scan - got)
                    buf.write(chunk[:take])
                    got += take
                    if got >= scan:
                        break
        except WithRuntimeError as e:
            return _run.reading_failed(p, e)
        return _run.read_result(p, fi, buf, got)
    if name == WRITE_FILE_NAME:
        p = _run.resolve(s["path"])
        try:
            fi = await sbx.files.write_file(p, s["content"].encode("utf-8"))
        except WithRuntimeError as e:
            return _run.api_result(e, "")
        return _run.write_result(fi)
    p = _run.list_path(s)
    try:
        page = await sbx.files.list_page(p, 1, limit=MAX_LIST_ENTRIES)
    except WithRuntimeError as e:
        return _run.api_result(e, "")
    return _run.list_result(p, page)
