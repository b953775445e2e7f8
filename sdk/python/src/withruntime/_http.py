"""The HTTP layer shared by the sync and async clients: building requests,
turning error answers into APIError, and request bodies."""

from __future__ import annotations

import io
import json
import os
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any, BinaryIO
from urllib.parse import quote

import httpx

from .errors import APIError, WithRuntimeError, api_error, status_of_code
from .types import NetworkPolicy
from .volumes import VolumeMountArg, mounts_body

NDJSON = "application/x-ndjson"
OCTET = "application/octet-stream"
JSON = "application/json"

#: Upload chunk size for file objects (bytes).
CHUNK_SIZE = 1 << 20

#: The HTTP client's own timeouts: connecting is bounded, the rest is
#: bounded per request by the client's response and idle timeouts (see
#: _wait.py), which override these.
DEFAULT_TIMEOUT = httpx.Timeout(None, connect=30.0)

#: What a file upload accepts: bytes, text (UTF-8), a binary file object, an
#: iterable of byte chunks (sync), or also an async iterable (async client).
UploadSource = bytes | bytearray | memoryview | str | BinaryIO | Iterable[bytes]
AsyncUploadSource = UploadSource | AsyncIterable[bytes]


def sandbox_path(sandbox_id: str, suffix: str = "") -> str:
    return "/v1/sandboxes/" + quote(sandbox_id, safe="") + suffix


def quote_seg(segment: str) -> str:
    """One path segment, escaped."""
    return quote(segment, safe="")


def decode_error(status: int, reason: str, data: bytes) -> APIError:
    """Turns an error answer into the APIError subclass of its code."""
    try:
        body = json.loads(data)
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict) and err.get("code"):
            return api_error(status, str(err["code"]), str(err.get("message", "")))
    except ValueError:
        pass
    msg = data.decode("utf-8", "replace").strip() or reason or f"HTTP {status}"
    return api_error(status, f"http_{status}", msg)


def unreachable(base_url: str, err: Exception) -> WithRuntimeError:
    from .errors import TransportError

    return TransportError(f"withruntime: cannot reach the Runtime server at {base_url}: {err}")


def headers(api_key: str, accept: str, content_type: str | None = None) -> dict[str, str]:
    h = {"Accept": accept, "User-Agent": "withruntime-python"}
    if api_key:
        h["Authorization"] = "Bearer " + api_key
    if content_type:
        h["Content-Type"] = content_type
    return h


def drop_none(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


DEFAULT_NETWORK: dict[str, Any] = {"internet": False}


#: What the SDK takes as a network policy: a NetworkPolicy or its wire dict.
NetworkArg = NetworkPolicy | Mapping[str, Any]

#: What the SDK takes as a usage window bound: an aware datetime (a naive one
#: is taken as UTC), a date (a UTC day: from its midnight, or for ``to``
#: through its end), or a string the server parses (RFC 3339 or YYYY-MM-DD).
When = datetime | date | str


def network_body(network: NetworkArg) -> dict[str, Any]:
    """A network policy as the API takes it."""
    if isinstance(network, NetworkPolicy):
        return network.to_dict()
    return dict(network)


def create_body(
    *,
    template: str | None,
    timeout_seconds: int | None,
    cpu: float | None,
    memory_mib: int | None,
    disk_mib: int | None,
    env: Mapping[str, str] | None,
    metadata: Mapping[str, str] | None,
    network: NetworkArg | None,
    secrets: Sequence[str] | None = None,
    max_cost_micros: int | None = None,
    on_lease_end: str | None = None,
    auto_resume: bool | None = None,
    snapshot: str | None = None,
    pause_mode: str | None = None,
    volumes: Sequence[VolumeMountArg] | None = None,
) -> dict[str, Any]:
    """The body of POST /v1/sandboxes. Unset (None) fields are left out and
    take the server's defaults. ``network`` is sent only when it differs
    from the default ``{"internet": False}``."""
    if isinstance(secrets, str):
        raise TypeError('secrets: give a list of secret names, such as secrets=["OPENAI_API_KEY"]')
    body: dict[str, Any] = drop_none(
        {
            "template": template or None,
            "timeoutSeconds": int(timeout_seconds) if timeout_seconds else None,
            "cpu": float(cpu) if cpu else None,
            "memoryMiB": int(memory_mib) if memory_mib else None,
            "diskMiB": int(disk_mib) if disk_mib else None,
            "env": dict(env) if env else None,
            "metadata": dict(metadata) if metadata else None,
            "secrets": list(secrets) if secrets else None,
            "maxCostMicros": int(max_cost_micros) if max_cost_micros else None,
            "onLeaseEnd": on_lease_end or None,
            "pauseMode": pause_mode or None,
            "autoResume": bool(auto_resume) if auto_resume is not None else None,
            "snapshot": snapshot or None,
            "volumes": mounts_body(volumes) if volumes else None,
        }
    )
    if network is not None:
        net = network_body(network)
        if net != DEFAULT_NETWORK:
            body["network"] = net
    return body


def fork_body(
    count: int,
    *,
    keep_snapshot: bool,
    name: str | None,
    sandbox_options: Mapping[str, Any],
) -> dict[str, Any]:
    """The body of POST /v1/sandboxes/{id}/fork: ``count``, and each new
    sandbox's options as :func:`create_body` takes them (its template and
    disk are the source's)."""
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(f"count: give the number of sandboxes to make, an int; got {count!r}")
    body = create_body(
        template=None,
        disk_mib=None,
        timeout_seconds=sandbox_options.get("timeout_seconds"),
        cpu=sandbox_options.get("cpu"),
        memory_mib=sandbox_options.get("memory_mib"),
        env=sandbox_options.get("env"),
        metadata=sandbox_options.get("metadata"),
        network=sandbox_options.get("network"),
        secrets=sandbox_options.get("secrets"),
        max_cost_micros=sandbox_options.get("max_cost_micros"),
        on_lease_end=sandbox_options.get("on_lease_end"),
        auto_resume=sandbox_options.get("auto_resume"),
        pause_mode=sandbox_options.get("pause_mode"),
    )
    body["count"] = count
    if sandbox_options.get("mode"):
        body["mode"] = sandbox_options["mode"]
    if keep_snapshot:
        body["keepSnapshot"] = True
    if name:
        body["name"] = name
    return body


def snapshot_path(ref: str) -> str:
    """The path of the snapshot ``ref`` (its id or name)."""
    return "/v1/snapshots/" + quote(ref, safe="")


def secret_body(name: str, value: str, hosts: Sequence[str]) -> dict[str, Any]:
    """The body of POST /v1/secrets."""
    if isinstance(hosts, str):
        raise TypeError('hosts: give a list of host names, such as hosts=["api.example.com"]')
    return {"name": name, "value": value, "hosts": list(hosts)}


def secret_path(name: str) -> str:
    return "/v1/secrets/" + quote(name, safe="")


def key_body(name: str, daily_limit_micros: int | None) -> dict[str, Any]:
    """The body of POST /v1/keys."""
    body: dict[str, Any] = {"name": name}
    if daily_limit_micros:
        body["dailyLimitMicros"] = int(daily_limit_micros)
    return body


def key_path(key_id: str) -> str:
    return "/v1/keys/" + quote(key_id, safe="")


def _when(v: When) -> str:
    if isinstance(v, datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=UTC)
        return v.isoformat()
    if isinstance(v, date):
        return v.isoformat()
    return str(v)


def usage_params(from_: When | None, to: When | None, group_by: str | None) -> list[tuple[str, str]]:
    """The query of GET /v1/usage; unset bounds take the server's defaults."""
    q: list[tuple[str, str]] = []
    if from_ is not None and from_ != "":
        q.append(("from", _when(from_)))
    if to is not None and to != "":
        q.append(("to", _when(to)))
    if group_by:
        q.append(("groupBy", group_by))
    return q


def window_params(from_: When | None, to: When | None) -> list[tuple[str, str]]:
    """A from/to query (GET .../metrics); unset bounds are left out."""
    q: list[tuple[str, str]] = []
    if from_ is not None and from_ != "":
        q.append(("from", _when(from_)))
    if to is not None and to != "":
        q.append(("to", _when(to)))
    return q


def list_params(state: str | None, metadata: Mapping[str, str] | None) -> list[tuple[str, str]]:
    q: list[tuple[str, str]] = []
    if state:
        q.append(("state", state))
    for k in sorted(metadata or {}):
        q.append(("metadata." + k, str(metadata[k])))  # type: ignore[index]
    return q


def exec_body(
    command: str | Sequence[str] | None,
    *,
    argv: Sequence[str] | None,
    cwd: str | None,
    env: Mapping[str, str] | None,
    timeout_seconds: float | None,
    max_output_bytes: int | None,
    stdin: str | None,
    user: str | None,
) -> dict[str, Any]:
    """The body of POST .../exec. A list or tuple ``command`` is an argv."""
    if command is not None and not isinstance(command, str):
        if argv is not None:
            raise TypeError("exec: give the command either as command or as argv, not both")
        argv, command = list(command), None
    if command is None and argv is None:
        raise TypeError("exec: give a command line (command='...') or an argv (argv=[...])")
    return drop_none(
        {
            "command": command,
            "argv": list(argv) if argv is not None else None,
            "cwd": cwd or None,
            "env": dict(env) if env else None,
            "timeoutSeconds": timeout_seconds if timeout_seconds else None,
            "maxOutputBytes": max_output_bytes if max_output_bytes else None,
            "stdin": stdin or None,
            "user": user or None,
        }
    )


def create_exec_body(
    command: str | Sequence[str] | None,
    *,
    argv: Sequence[str] | None,
    cwd: str | None,
    command_env: Mapping[str, str] | None,
    command_timeout_seconds: float | None,
    max_output_bytes: int | None,
    stdin: str | None,
    user: str | None,
    sandbox_options: Mapping[str, Any],
) -> dict[str, Any]:
    """The body of POST /v1/sandboxes with a first command ("exec"):
    ``sandbox_options`` are :func:`create_body`'s, the rest the command's."""
    body = create_body(**{k: sandbox_options.get(k) for k in _CREATE_OPTIONS})
    unknown = set(sandbox_options) - set(_CREATE_OPTIONS)
    if unknown:
        raise TypeError(f"unknown sandbox option(s): {', '.join(sorted(unknown))}")
    body["exec"] = exec_body(
        command,
        argv=argv,
        cwd=cwd,
        env=command_env,
        timeout_seconds=command_timeout_seconds,
        max_output_bytes=max_output_bytes,
        stdin=stdin,
        user=user,
    )
    return body


_CREATE_OPTIONS = (
    "template",
    "timeout_seconds",
    "cpu",
    "memory_mib",
    "disk_mib",
    "env",
    "metadata",
    "network",
    "secrets",
    "max_cost_micros",
    "on_lease_end",
    "auto_resume",
    "volumes",
    "pause_mode",
)


def first_answer(data: Any) -> tuple[dict[str, Any], dict[str, Any] | None, APIError | None]:
    """Splits the answer to a create with a first command into the sandbox,
    the command's result, and the error when it could not run."""
    if not isinstance(data, dict) or not isinstance(data.get("sandbox"), dict) or not data["sandbox"].get("id"):
        raise WithRuntimeError(f"withruntime: the create's answer has no sandbox: {str(data)[:200]}")
    err = data.get("error")
    if isinstance(err, dict):
        code = str(err.get("code") or "internal")
        return data["sandbox"], None, api_error(status_of_code(code), code, str(err.get("message", "")))
    res = data.get("result")
    if not isinstance(res, dict):
        raise WithRuntimeError("withruntime: the create's answer has neither a result nor an error")
    return data["sandbox"], res, None


def _remaining_length(f: Any) -> int | None:
    """How many bytes are left to read in a seekable binary file object."""
    if isinstance(f, io.TextIOBase):
        return None
    try:
        if not f.seekable():
            return None
        pos = f.tell()
        end = f.seek(0, os.SEEK_END)
        f.seek(pos)
        return max(int(end) - int(pos), 0)
    except (AttributeError, OSError, ValueError):
        return None


def _file_chunks(f: Any) -> Iterator[bytes]:
    while True:
        chunk = f.read(CHUNK_SIZE)
        if not chunk:
            return
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8")
        yield bytes(chunk)


def _iter_chunks(it: Iterable[Any]) -> Iterator[bytes]:
    for chunk in it:
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8")
        yield bytes(chunk)


async def _async_iter_chunks(it: AsyncIterable[Any]) -> AsyncIterator[bytes]:
    async for chunk in it:
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8")
        yield bytes(chunk)


async def _async_file_chunks(f: Any) -> AsyncIterator[bytes]:
    while True:
        chunk = f.read(CHUNK_SIZE)
        if hasattr(chunk, "__await__"):
            chunk = await chunk
        if not chunk:
            return
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8")
        yield bytes(chunk)


def upload_content(src: Any, *, is_async: bool = False) -> tuple[Any, dict[str, str]]:
    """The request content for an upload and the headers it needs: bytes are
    sent as they are, a file object in chunks (with Content-Length when its
    size is known), an iterable chunk by chunk (chunked transfer encoding).
    Nothing is read into memory whole."""
    if isinstance(src, str):
        return src.encode("utf-8"), {}
    if isinstance(src, (bytes, bytearray, memoryview)):
        return bytes(src), {}
    if hasattr(src, "read"):
        length = _remaining_length(src)
        hdr = {"Content-Length": str(length)} if length is not None else {}
        if is_async:
            return _async_file_chunks(src), hdr
        return _file_chunks(src), hdr
    if is_async and hasattr(src, "__aiter__"):
        return _async_iter_chunks(src), {}
    if isinstance(src, Iterable):
        if is_async:
            sync_it = _iter_chunks(src)

            async def agen() -> AsyncIterator[bytes]:
                for chunk in sync_it:
                    yield chunk

            return agen(), {}
        return _iter_chunks(src), {}
    raise TypeError(
        f"cannot upload a {type(src).__name__}: give bytes, str, a binary file object or an iterable of bytes"
    )
