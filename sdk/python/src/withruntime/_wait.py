"""Bounded waits: how long the clients wait on a server that accepted the
connection and went silent (stopped with SIGSTOP, a hung host).

Every request waits at most the client's ``response_timeout`` for the
answer's headers, plus what the call runs on the server before it answers
(``wait``: a collected exec its timeout, a create a sandbox's boot, ...);
every read of a stream or download waits at most ``idle_timeout`` for a
byte (the server sends a heartbeat line every 2 s on streams, so 5 s or
more is safe). httpx applies one read bound per request; it is the
response bound while the headers are awaited and becomes the idle bound
once they came (``after_headers``). A bound that runs out is a
:class:`~withruntime.ServerTimeoutError`.
"""

from __future__ import annotations

from typing import Any

import httpx

from .errors import ServerTimeoutError, TransportError, WithRuntimeError

#: Seconds a call waits for the answer's headers, beyond what it runs first.
DEFAULT_RESPONSE_TIMEOUT = 60.0
#: Seconds a stream or download may go without a byte.
DEFAULT_IDLE_TIMEOUT = 60.0

#: What calls run on the server before they answer (seconds): a sandbox's
#: boot (the server bounds it at 2 min), a pause or resume (10 min), a
#: template build's pull or upload before its stream, a kernel's start.
BOOT_WAIT = 120.0
CHECKPOINT_WAIT = 600.0
BUILD_WAIT = 120.0
KERNEL_WAIT = 60.0

#: The server's default timeouts of an exec and a code cell (seconds).
EXEC_DEFAULT = 120.0
CODE_DEFAULT = 300.0


def check_bound(value: float | None, name: str) -> float | None:
    """A bound as given to a client: None or 0 is no bound."""
    if value is None or value == 0:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise TypeError(f"{name}: give a number of seconds (0 or None for no bound), not {value!r}")
    return float(value)


def run_wait(timeout_seconds: float | None, default: float) -> float:
    """What a collected exec or cell of timeout_seconds runs (None or 0: the
    server's default)."""
    return float(timeout_seconds) if timeout_seconds else default


def request_timeout(response: float | None, idle: float | None, wait: float = 0.0) -> httpx.Timeout:
    """The httpx timeouts of one request: connect at most 30 s (or the
    response bound if shorter), the headers within response + wait, each
    write (an upload the server stopped reading) within idle."""
    read = None if response is None else response + wait
    connect = 30.0 if response is None else min(30.0, response)
    return httpx.Timeout(connect=connect, read=read, write=idle, pool=read)


def after_headers(resp: httpx.Response, idle: float | None) -> None:
    """Makes the read bound of a streamed answer's body the idle bound (httpx
    reads it when the body is first iterated)."""
    t = resp.request.extensions.get("timeout")
    if isinstance(t, dict):
        t["read"] = idle


def send_error(base_url: str, req: httpx.Request, e: httpx.HTTPError) -> WithRuntimeError:
    """The error of a request whose answer's headers did not come: a
    ServerTimeoutError when a bound ran out, else the server is unreachable."""
    if isinstance(e, (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout)):
        return ServerTimeoutError(base_url, req.method, req.url.path, _bound(req, e), idle=False)
    return TransportError(f"withruntime: cannot reach the Runtime server at {base_url}: {e}")


def read_error(base_url: str | None, resp: httpx.Response, e: httpx.HTTPError, what: str) -> WithRuntimeError:
    """The error of a streamed answer that broke (what says which): a
    ServerTimeoutError when the idle bound ran out. base_url None: the
    request's scheme and host."""
    if isinstance(e, httpx.TimeoutException):
        req = resp.request
        server = base_url or f"{req.url.scheme}://{req.url.netloc.decode('ascii', 'replace')}"
        return ServerTimeoutError(server, req.method, req.url.path, _bound(req, e), idle=True)
    return TransportError(f"withruntime: {what}: {e}")


def _bound(req: httpx.Request, e: httpx.HTTPError) -> float:
    t: Any = req.extensions.get("timeout") or {}
    key = "write" if isinstance(e, httpx.WriteTimeout) else "pool" if isinstance(e, httpx.PoolTimeout) else "read"
    v = t.get(key)
    return float(v) if v is not None else 0.0
