"""Errors raised by the SDK.

Every error is a :class:`WithRuntimeError`. Every error answer of the server
is an :class:`APIError` with the HTTP ``status``, a stable ``code`` and a
``message`` that says what to fix; each code has its own subclass, so you can
catch exactly what you handle::

    try:
        sbx.exec("python3 main.py")
    except LeaseEndedError:
        ...  # the sandbox's lease ran out: create a new one

A command that exits non-zero is *not* an error: ``exec`` returns its exit
code in the result.

The codes and statuses are the API's (``api/openapi.yaml``) and the same as
the Go SDK's sentinels (``ErrNotFound``, ``ErrLeaseEnded``, ...).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "WithRuntimeError",
    "NotConfiguredError",
    "TransportError",
    "ServerTimeoutError",
    "TerminalDisconnectedError",
    "APIError",
    "BadRequestError",
    "UnauthorizedError",
    "ForbiddenError",
    "NotFoundError",
    "MethodNotAllowedError",
    "APITimeoutError",
    "ConflictError",
    "SandboxPausedError",
    "SandboxGoneError",
    "LeaseEndedError",
    "SandboxStoppedError",
    "TooLargeError",
    "RangeNotSatisfiableError",
    "RateLimitedError",
    "InternalError",
    "UnavailableError",
    "UnsupportedError",
    "NoSpaceError",
    "CostCapError",
    "SpendingLimitError",
    "ERROR_CODES",
    "api_error",
    "status_of_code",
]


class WithRuntimeError(Exception):
    """The base of every error this SDK raises."""


class NotConfiguredError(WithRuntimeError):
    """No Runtime server is configured (no ``WITHRUNTIME_URL``, no config
    file, no ``base_url``). The message says how to configure one."""


class TransportError(WithRuntimeError):
    """The server could not be reached, or a connection broke mid-answer."""


class ServerTimeoutError(TransportError, TimeoutError):
    """A wait on a server that accepted the connection ran out (it may be
    stopped or overloaded): no answer headers within the client's
    ``response_timeout`` (plus what the call runs first), or, with ``idle``,
    a stream or download that sent nothing for ``idle_timeout`` seconds.
    ``server`` is its base URL, ``method`` and ``path`` the request's,
    ``seconds`` the bound that ran out. Also a built-in ``TimeoutError``."""

    def __init__(self, server: str, method: str, path: str, seconds: float, *, idle: bool) -> None:
        self.server, self.method, self.path, self.seconds, self.idle = server, method, path, seconds, idle
        secs = f"{seconds:.1f} s" if seconds < 10 and seconds != int(seconds) else f"{round(seconds)} s"
        if idle:
            msg = (
                f"withruntime: the answer of the Runtime server at {server} to {method} {path} sent nothing "
                f"for {secs} (it accepted the connection: it may be stopped or overloaded); Client(idle_timeout=...) waits longer"
            )
        else:
            msg = (
                f"withruntime: the Runtime server at {server} did not answer {method} {path} within {secs} "
                f"(it accepted the connection: it may be stopped or overloaded); Client(response_timeout=...) waits longer"
            )
        super().__init__(msg)


class TerminalDisconnectedError(WithRuntimeError):
    """A terminal's connection ended before its program did (``disconnect``,
    a network failure, the sandbox paused or stopped). The program may still
    run: ``sbx.pty.connect(pid)`` connects again."""


class APIError(WithRuntimeError):
    """An error answer from the server (or an error event that ended an exec
    stream): ``status`` (the HTTP status), ``code`` (stable, such as
    ``"not_found"`` or ``"lease_ended"``) and ``message`` (what was wrong and
    how to fix it).

    ``str(err)`` is ``"withruntime: CODE (STATUS): MESSAGE"``, as in the Go
    SDK.
    """

    status: int
    code: str
    message: str

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(status, code, message)
        self.status = status
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"withruntime: {self.code} ({self.status}): {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, message={self.message!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.status, self.code, self.message))


class BadRequestError(APIError):
    """400 ``bad_request``: the request was invalid; the message says what to fix."""


class UnauthorizedError(APIError):
    """401 ``unauthorized``: the API key is missing, wrong or revoked."""


class ForbiddenError(APIError):
    """403 ``forbidden``: the sandbox refused the operation (permission denied,
    read-only filesystem)."""


class NotFoundError(APIError):
    """404 ``not_found``: no such sandbox, file, directory, process or key."""


class MethodNotAllowedError(APIError):
    """405 ``method_not_allowed``: the path does not support the method."""


class APITimeoutError(APIError):
    """408 ``timeout``: the server gave up waiting; also 504
    ``agent_timeout``: the sandbox's agent did not answer within the
    server's bound. (A bound of this client on a silent server is a
    :class:`ServerTimeoutError`.)"""


class ConflictError(APIError):
    """409 ``conflict``: the sandbox or file is in the wrong state (still
    starting, already exists, not empty)."""


class SandboxPausedError(ConflictError):
    """409 ``sandbox_paused``: the sandbox is paused (``resume`` it, or
    create it with ``auto_resume``), or was paused while the request ran
    (the command it ran was killed). A :class:`ConflictError`, as its
    status is 409."""


class SandboxGoneError(APIError):
    """410: the sandbox is no longer running (either subclass below)."""


class LeaseEndedError(SandboxGoneError):
    """410 ``lease_ended``: the sandbox's lease ended and the server destroyed
    it. Create a new sandbox; extend leases with ``set_timeout`` before they
    end."""


class SandboxStoppedError(SandboxGoneError):
    """410 ``sandbox_stopped``: the sandbox was destroyed (by ``kill`` or
    another client) or failed."""


class TooLargeError(APIError):
    """413 ``too_large``: an upload or request body is over the server's cap."""


class RangeNotSatisfiableError(APIError):
    """416 ``range_not_satisfiable``: a ranged download (``offset``) starts
    past the end of the file."""


class RateLimitedError(APIError):
    """429 ``rate_limited``: slow down and retry."""


class InternalError(APIError):
    """500 ``internal``: the server failed; its log has details."""


class UnavailableError(APIError):
    """503 ``unavailable``: no capacity for another sandbox now; retry later."""


class NoSpaceError(APIError):
    """507 ``no_space``: the sandbox's disk is full."""


class UnsupportedError(APIError):
    """501 ``not_implemented``: the sandbox cannot do this, such as
    ``run_code`` in a sandbox whose template has no kernels (create it with
    ``template="code-interpreter"``)."""


class CostCapError(BadRequestError):
    """400 ``cost_cap``: the sandbox's first lease could cost more than the
    create's ``max_cost_micros``. The message gives the worst case in
    micro-dollars and how it was computed (every vCPU busy for the whole
    lease plus the memory size for the whole lease, at the server's
    prices); lower ``timeout_seconds``, ``cpu`` or ``memory_mib``, or raise
    the cap. A :class:`BadRequestError`, as its status is 400."""


class SpendingLimitError(RateLimitedError):
    """429 ``spending_limit``: the API key reached its daily spending limit
    (``daily_limit_micros``); its creates are refused until midnight UTC.
    The message gives the key's spend, its limit and when it resets. A
    :class:`RateLimitedError`, as its status is 429."""


#: Each API error code, with its class and HTTP status.
ERROR_CODES: dict[str, tuple[type[APIError], int]] = {
    "bad_request": (BadRequestError, 400),
    "unauthorized": (UnauthorizedError, 401),
    "forbidden": (ForbiddenError, 403),
    "not_found": (NotFoundError, 404),
    "method_not_allowed": (MethodNotAllowedError, 405),
    "timeout": (APITimeoutError, 408),
    "agent_timeout": (APITimeoutError, 504),
    "conflict": (ConflictError, 409),
    "sandbox_paused": (SandboxPausedError, 409),
    "lease_ended": (LeaseEndedError, 410),
    "sandbox_stopped": (SandboxStoppedError, 410),
    "too_large": (TooLargeError, 413),
    "range_not_satisfiable": (RangeNotSatisfiableError, 416),
    "rate_limited": (RateLimitedError, 429),
    "internal": (InternalError, 500),
    "not_implemented": (UnsupportedError, 501),
    "unavailable": (UnavailableError, 503),
    "no_space": (NoSpaceError, 507),
    "cost_cap": (CostCapError, 400),
    "spending_limit": (SpendingLimitError, 429),
}

# The class for an answer whose code this SDK does not know (a newer server)
# or that carried no error body, by status. As in the Go SDK, an unknown 410
# counts as sandbox_stopped.
_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    408: APITimeoutError,
    504: APITimeoutError,
    409: ConflictError,
    410: SandboxStoppedError,
    413: TooLargeError,
    416: RangeNotSatisfiableError,
    429: RateLimitedError,
    500: InternalError,
    501: UnsupportedError,
    503: UnavailableError,
    507: NoSpaceError,
}


def status_of_code(code: str) -> int:
    """The HTTP status an error code maps to (500 if unknown)."""
    entry = ERROR_CODES.get(code)
    return entry[1] if entry else 500


def api_error(status: int, code: str, message: str) -> APIError:
    """The :class:`APIError` subclass instance for an error answer: chosen by
    ``code``, or by ``status`` for a code this SDK does not know."""
    entry = ERROR_CODES.get(code)
    cls = entry[0] if entry else _BY_STATUS.get(status, APIError)
    return cls(status, code, message)
