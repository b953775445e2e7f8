"""What the four tools do (a port of the Go SDK's tools/run.go): each runner
takes checked arguments and a sandbox and returns the Result for the model,
or raises Failure when Runtime itself failed."""

from __future__ import annotations

import base64
import posixpath
from typing import Any

from ..errors import APIError, SandboxGoneError, WithRuntimeError
from ..types import WORKSPACE, ExecResult, FileInfo, FileListPage
from ._cap import CapBuf, marker

#: The tools' names.
EXEC_NAME = "runtime_exec"
READ_FILE_NAME = "runtime_read_file"
WRITE_FILE_NAME = "runtime_write_file"
LIST_FILES_NAME = "runtime_list_files"

MAX_OUTPUT_BYTES = 16 << 10
MAX_READ_BYTES = 32 << 10
MAX_READ_BINARY_BYTES = 12 << 10
MAX_READ_SCAN_BYTES = 64 << 20
MAX_LIST_ENTRIES = 500
DEFAULT_TIMEOUT_SECONDS = 120
MAX_TIMEOUT_SECONDS = 1800
MAX_COMMAND_BYTES = 256 << 10
MAX_PATH_BYTES = 4096
MAX_CONTENT_BYTES = 8 << 20


class Failure(Exception):
    """Runtime itself failed: ``result`` is still for the model, ``err`` for
    the program."""

    def __init__(self, result: dict[str, Any], err: BaseException) -> None:
        super().__init__(str(err))
        self.result = result
        self.err = err


def result(text: str, data: dict[str, Any] | None = None, is_error: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"text": text, "isError": is_error}
    if data is not None:
        out["data"] = data
    return out


def error_result(msg: str) -> dict[str, Any]:
    return result("error: " + msg, is_error=True)


def sandbox_error_result(err: BaseException) -> dict[str, Any]:
    if isinstance(err, SandboxGoneError):
        return error_result(f"the sandbox is no longer running ({err}); its files are gone")
    return error_result(f"the sandbox could not be reached: {err}")


def api_result(err: BaseException, hint: str) -> dict[str, Any]:
    """An error the model can fix (no such file, a directory where a file was
    wanted) is a result; the sandbox being gone or the server failing raises
    Failure."""
    if isinstance(err, APIError):
        if err.status == 404:
            return error_result(f"{err.message} ({hint})" if hint else err.message)
        if err.status in (400, 403, 409, 413, 507):
            return error_result(err.message)
    raise Failure(sandbox_error_result(err), err)


def resolve(p: str) -> str:
    """Makes p absolute (relative paths are under /workspace) and clean, as
    Go's path.Clean does."""
    if not p.startswith("/"):
        p = posixpath.join(WORKSPACE, p)
    p = posixpath.normpath(p)
    if p.startswith("//"):
        p = "/" + p.lstrip("/")
    return p


# -- checks --------------------------------------------------------------


def check_exec(s: dict[str, str], n: dict[str, int]) -> str:
    if not s.get("command", "").strip():
        return '"command" is empty; give a shell command line such as "ls -la"'
    t = n.get("timeoutSeconds", 0)
    if t < 0 or t > MAX_TIMEOUT_SECONDS:
        return (
            f'"timeoutSeconds" is {t}; give 0 for the default of {DEFAULT_TIMEOUT_SECONDS} seconds, '
            f"or up to {MAX_TIMEOUT_SECONDS}"
        )
    return ""


def check_read(s: dict[str, str], n: dict[str, int]) -> str:
    if s.get("path", "") == "":
        return '"path" is empty; give the file to read, such as "hello.py"'
    return ""


def check_write(s: dict[str, str], n: dict[str, int]) -> str:
    if s.get("path", "") == "":
        return '"path" is empty; give the file to write, such as "hello.py"'
    p = resolve(s["path"])
    if p in ("/", WORKSPACE):
        return f"{p} is a directory; give a file path such as {posixpath.join(p, 'main.py')}"
    return ""


# -- exec ----------------------------------------------------------------


def exec_plan(s: dict[str, str], n: dict[str, int]) -> tuple[str, str, int]:
    timeout = n.get("timeoutSeconds", 0) or DEFAULT_TIMEOUT_SECONDS
    cwd = resolve(s["cwd"]) if s.get("cwd") else WORKSPACE
    return s["command"], cwd, timeout


def exec_error(err: BaseException) -> dict[str, Any]:
    if isinstance(err, APIError) and err.status == 400:  # such as a cwd that does not exist
        return error_result(err.message)
    if isinstance(err, WithRuntimeError):
        raise Failure(sandbox_error_result(err), err)
    raise err


def _section(name: str, text: str) -> str:
    if text == "":
        return f"{name}: (empty)\n"
    return f"{name}:\n{text}" + ("" if text.endswith("\n") else "\n")


def exec_result(res: ExecResult | None, stdout: CapBuf, stderr: CapBuf, cwd: str, timeout: int) -> dict[str, Any]:
    if res is None:
        err = WithRuntimeError("tools: exec stream ended without a result")
        raise Failure(sandbox_error_result(err), err)
    out_text, out_cut = stdout.text("stdout")
    err_text, err_cut = stderr.text("stderr")
    data: dict[str, Any] = {
        "exitCode": res.exit_code,
        "stdout": out_text,
        "stderr": err_text,
        "stdoutCutBytes": out_cut,
        "stderrCutBytes": err_cut,
        "timedOut": res.timed_out,
        "oomKilled": res.oom_killed,
    }
    if res.signal:
        data["signal"] = res.signal
    data["cwd"] = cwd
    data["durationMs"] = res.duration_ms

    b = f"exit_code: {res.exit_code}\n"
    if res.timed_out:
        b += (
            f"note: the command was killed by its timeout after {timeout} seconds; give a larger "
            f"timeoutSeconds (up to {MAX_TIMEOUT_SECONDS}) or run it in the background\n"
        )
    elif res.oom_killed:
        b += "note: the command was killed because the sandbox ran out of memory\n"
    elif res.process_limit_killed:
        b += "note: the command was killed because it kept the sandbox at its process limit (too many processes)\n"
    elif res.signal:
        b += f"note: the command was killed by {res.signal}\n"
    b += _section("stdout", out_text)
    b += _section("stderr", err_text)
    return result(b.removesuffix("\n"), data)


# -- read ----------------------------------------------------------------


def read_stat_result(p: str, fi: FileInfo) -> dict[str, Any] | None:
    if fi.type == "dir":
        return error_result(f"{p} is a directory; list it with runtime_list_files")
    return None


def read_scan_limit(fi: FileInfo) -> int:
    return MAX_READ_SCAN_BYTES if fi.size <= MAX_READ_SCAN_BYTES else MAX_READ_BYTES


def _is_text(b: bytes) -> bool:
    if b"\x00" in b:
        return False
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def read_result(p: str, fi: FileInfo, buf: CapBuf, n: int) -> dict[str, Any]:
    size = max(fi.size, n)
    head, tail, cut = buf.parts()
    if _is_text(head) and _is_text(tail):
        content = head.decode("utf-8")
        if cut > 0:
            content += marker(cut, n, "the file") + tail.decode("utf-8")
        if n < size:  # only the head of a huge file was read
            content += (
                f"\n[... only the first {n} of {size} bytes are shown; read other parts with runtime_exec, "
                f"e.g. tail -c 4000 {p} ...]\n"
            )
        data = {
            "path": p,
            "size": size,
            "encoding": "utf-8",
            "content": content,
            "cutBytes": size - len(head) - len(tail),
        }
        return result(f"{p} ({size} bytes, encoding: utf-8)\n{content}", data)
    raw = buf.prefix(MAX_READ_BINARY_BYTES)
    content = base64.b64encode(raw).decode("ascii")
    cut_bytes = size - len(raw)
    data = {"path": p, "size": size, "encoding": "base64", "content": content, "cutBytes": cut_bytes}
    text = (
        f"{p} ({size} bytes, encoding: base64; the file is not UTF-8 text, so its bytes are shown "
        f"base64-encoded)\n{content}"
    )
    if cut_bytes > 0:
        text += (
            f"\n[... only the first {len(raw)} of {size} bytes are shown; inspect the rest with runtime_exec, "
            f"e.g. xxd -s {len(raw)} -l 256 {p} ...]"
        )
    return result(text, data)


def reading_failed(p: str, err: BaseException) -> dict[str, Any]:
    e = WithRuntimeError(f"tools: reading {p}: {err}")
    raise Failure(sandbox_error_result(e), err)


# -- write ---------------------------------------------------------------


def write_result(fi: FileInfo) -> dict[str, Any]:
    return result(f"wrote {fi.size} bytes to {fi.path}", {"path": fi.path, "bytes": fi.size})


# -- list ----------------------------------------------------------------


def list_path(s: dict[str, str]) -> str:
    return resolve(s["path"]) if s.get("path") else WORKSPACE


_FILE_INFO_KEYS = ("name", "path", "type", "size", "mode", "modTime", "uid", "gid")


def file_info_json(fi: FileInfo) -> dict[str, Any]:
    """A FileInfo with the Go SDK's JSON keys."""
    raw = fi.to_dict()
    out: dict[str, Any] = {
        "name": fi.name,
        "path": fi.path,
        "type": fi.type,
        "size": fi.size,
        "mode": fi.mode,
        "modTime": raw.get("modTime", ""),
        "uid": fi.uid,
        "gid": fi.gid,
    }
    if fi.target:
        out["target"] = fi.target
    return out


def list_result(p: str, page: FileListPage) -> dict[str, Any]:
    """The result of one listing page asked for with limit MAX_LIST_ENTRIES:
    its entries and the directory's total (the server counts it)."""
    shown = page.entries[:MAX_LIST_ENTRIES]
    total = max(len(shown), page.total or 0)
    truncated = page.truncated or total > len(shown)
    if truncated and total == len(shown):
        b = f"{p}: more than {total} entries"
    elif total == 0:
        b = f"{p}: empty directory"
    elif total == 1:
        b = f"{p}: 1 entry"
    else:
        b = f"{p}: {total} entries"
    if truncated:
        b += f"; the first {len(shown)} (by name) are shown"
    for e in shown:
        name, size = e.name, str(e.size)
        if e.type == "dir":
            name, size = name + "/", "-"
        elif e.type == "symlink":
            name += " -> " + e.target
        b += f"\n{e.type:<7} {size:>10}  {name}"
    if truncated:
        more = f"{total - len(shown)} more entries" if total > len(shown) else "more entries"
        b += f"\n[... {more} not shown; use runtime_exec with ls or find to see them ...]"
    data = {"path": p, "entries": [file_info_json(e) for e in shown], "total": total, "truncated": truncated}
    return result(b, data)
