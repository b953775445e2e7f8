"""The code interpreter's values: :class:`Execution` (what ``run_code``
returns), :class:`Result` (one rich output, a MIME bundle),
:class:`Logs`, :class:`ExecutionError`, :class:`OutputMessage` (what
``on_stdout``/``on_stderr`` get) and :class:`CodeContext`.

Code runs in sandboxes of the ``code-interpreter`` template
(``Sandbox.create(template=CODE_INTERPRETER_TEMPLATE)``), in contexts:
Jupyter kernels that keep their variables from one call to the next.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .errors import WithRuntimeError
from .types import parse_time

__all__ = [
    "CODE_INTERPRETER_TEMPLATE",
    "DATAFRAME_MIME",
    "DEFAULT_CODE_TIMEOUT_SECONDS",
    "Execution",
    "Result",
    "Logs",
    "ExecutionError",
    "OutputMessage",
    "CodeContext",
]

#: The template whose sandboxes run code in contexts.
CODE_INTERPRETER_TEMPLATE = "code-interpreter"
#: The MIME type of a pandas DataFrame's columns in a result's ``data``:
#: ``{column: [values...]}`` (see :attr:`Result.dataframe`).
DATAFRAME_MIME = "application/vnd.withruntime.dataframe+json"
#: The timeout of a ``run_code`` that sets none, in seconds.
DEFAULT_CODE_TIMEOUT_SECONDS = 300

# MIME type -> Result attribute.
_FORMATS = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
}


@dataclass(frozen=True)
class Result:
    """One rich output: the cell's value (``is_main_result``) or something
    it displayed (a chart, a DataFrame, ``display(...)``). Each format the
    kernel sent is an attribute: ``text``, ``html``, ``markdown``, ``svg``,
    ``latex``, ``javascript`` are strings; ``png``, ``jpeg``, ``pdf`` base64
    strings (see :meth:`png_bytes`); ``json`` the decoded value. ``data``
    holds every MIME type as sent."""

    data: dict[str, Any]
    is_main_result: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    text: str | None = None
    html: str | None = None
    markdown: str | None = None
    svg: str | None = None
    png: str | None = None
    jpeg: str | None = None
    pdf: str | None = None
    latex: str | None = None
    json: Any = None
    javascript: str | None = None
    #: What the matplotlib figure this result shows plots, read from the
    #: figure, as the server sent it (schema ``Chart``: ``type``, ``title``,
    #: ``xLabel``..., ``elements`` with their values); None for anything
    #: else.
    chart: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Result:
        data = d.get("data")
        data = dict(data) if isinstance(data, dict) else {}
        meta = d.get("metadata")
        kw: dict[str, Any] = {}
        for mime, attr in _FORMATS.items():
            if mime in data:
                v = data[mime]
                kw[attr] = v if attr == "json" or isinstance(v, str) else None
        chart = d.get("chart")
        return cls(
            data=data,
            is_main_result=bool(d.get("isMainResult", False)),
            metadata=dict(meta) if isinstance(meta, dict) else {},
            chart=chart if isinstance(chart, dict) else None,
            **kw,
        )

    def formats(self) -> list[str]:
        """The MIME types of this result."""
        return list(self.data)

    def png_bytes(self) -> bytes | None:
        """The PNG image, decoded (None if there is none)."""
        return base64.b64decode(self.png) if self.png else None

    def jpeg_bytes(self) -> bytes | None:
        """The JPEG image, decoded (None if there is none)."""
        return base64.b64decode(self.jpeg) if self.jpeg else None

    @property
    def dataframe(self) -> dict[str, list[Any]] | None:
        """A pandas DataFrame's columns, ``{column: [values...]}``, or None."""
        v = self.data.get(DATAFRAME_MIME)
        return v if isinstance(v, dict) else None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"data": self.data, "isMainResult": self.is_main_result}
        if self.metadata:
            d["metadata"] = self.metadata
        if self.chart is not None:
            d["chart"] = self.chart
        return d

    def __str__(self) -> str:
        return self.text or ""


@dataclass(frozen=True)
class ExecutionError:
    """An exception the code raised (``name`` such as ``"ZeroDivisionError"``,
    ``value`` its message, ``traceback`` plain text), or why the call failed:
    ``TimeoutError``, ``OutOfMemoryError``, ``KernelDied``."""

    name: str
    value: str
    traceback: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ExecutionError:
        return cls(name=str(d.get("name", "")), value=str(d.get("value", "")), traceback=str(d.get("traceback", "")))


@dataclass
class Logs:
    """What the code printed, chunk by chunk."""

    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class OutputMessage:
    """A chunk of output, as ``on_stdout`` and ``on_stderr`` get it;
    ``str(msg)`` is the text."""

    line: str
    error: bool = False

    def __str__(self) -> str:
        return self.line


@dataclass
class Execution:
    """What ``run_code`` produced. ``text`` is the cell's value as text
    (None if it had none); ``results`` every rich output in order; ``logs``
    stdout and stderr; ``error`` the exception, if any (an exception in the
    code is not raised: it is here)."""

    results: list[Result] = field(default_factory=list)
    logs: Logs = field(default_factory=Logs)
    error: ExecutionError | None = None
    execution_count: int = 0
    context_id: str = ""
    #: The timeout interrupted the code (the context keeps its variables,
    #: unless ``state_lost``).
    timed_out: bool = False
    #: The kernel was killed because the sandbox ran out of memory.
    out_of_memory: bool = False
    #: The kernel was lost during this call: the context's variables are gone.
    state_lost: bool = False
    #: This call ran in a new kernel because the previous one was lost:
    #: variables from earlier calls are gone (see ``notice``).
    restarted: bool = False
    #: A plain sentence about a lost or restarted kernel ("" otherwise).
    notice: str = ""
    logs_truncated: bool = False
    results_truncated: bool = False
    duration_ms: int = 0

    @property
    def text(self) -> str | None:
        """The main result's text/plain (the cell's value), or None."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Execution:
        ex = cls()
        ex._update(d)
        logs = d.get("logs")
        if isinstance(logs, dict):
            ex.logs = Logs(
                stdout=[str(s) for s in logs.get("stdout") or []], stderr=[str(s) for s in logs.get("stderr") or []]
            )
        ex.results = [Result.from_dict(r) for r in d.get("results") or [] if isinstance(r, dict)]
        return ex

    def _update(self, d: Mapping[str, Any]) -> None:
        """Takes the summary fields of an Execution (an end event's)."""
        err = d.get("error")
        if isinstance(err, dict):
            self.error = ExecutionError.from_dict(err)
        self.execution_count = int(d.get("executionCount", 0) or 0)
        self.context_id = str(d.get("contextId", "") or self.context_id)
        self.timed_out = bool(d.get("timedOut", False))
        self.out_of_memory = bool(d.get("outOfMemory", False))
        self.state_lost = bool(d.get("stateLost", False))
        self.restarted = bool(d.get("restarted", False))
        self.notice = str(d.get("notice", "") or "")
        self.logs_truncated = bool(d.get("logsTruncated", False))
        self.results_truncated = bool(d.get("resultsTruncated", False))
        self.duration_ms = int(d.get("durationMs", 0) or 0)


@dataclass(frozen=True)
class CodeContext:
    """A context: one kernel and the variables it keeps."""

    id: str
    language: str
    cwd: str
    #: ``"starting"``, ``"idle"``, ``"busy"`` or ``"dead"``.
    state: str
    created_at: datetime | None
    #: How many kernels the context lost (each time with its variables).
    restarts: int = 0
    #: Who the kernel runs as: ``"user"`` or ``"root"``.
    user: str = "user"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CodeContext:
        return cls(
            id=str(d.get("id", "")),
            language=str(d.get("language", "")),
            cwd=str(d.get("cwd", "")),
            state=str(d.get("state", "")),
            created_at=parse_time(d.get("createdAt")),
            restarts=int(d.get("restarts", 0) or 0),
            user=str(d.get("user", "") or "user"),
        )


# -- shared by the sync and async clients ---------------------------------

OutputHandler = Callable[[OutputMessage], Any]
ResultHandler = Callable[[Result], Any]
ErrorHandler = Callable[[ExecutionError], Any]


def context_id(context: CodeContext | str | None) -> str | None:
    if context is None or context == "":
        return None
    return context.id if isinstance(context, CodeContext) else str(context)


def run_body(
    code: str,
    *,
    context: CodeContext | str | None,
    language: str | None,
    timeout_seconds: float | None,
    env: Mapping[str, str] | None,
) -> dict[str, Any]:
    if not isinstance(code, str):
        raise TypeError("code must be a str")
    body: dict[str, Any] = {"code": code}
    cid = context_id(context)
    if cid:
        body["contextId"] = cid
    if language:
        body["language"] = language
    if timeout_seconds is not None:
        body["timeoutSeconds"] = timeout_seconds
    if env:
        body["env"] = dict(env)
    return body


def context_body(
    language: str | None, cwd: str | None, env: Mapping[str, str] | None, user: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if user:
        body["user"] = user
    if language:
        body["language"] = language
    if cwd:
        body["cwd"] = cwd
    if env:
        body["env"] = dict(env)
    return body


class Assembler:
    """Builds an Execution from a /code event stream, calling the handlers
    as events come (their return values are returned by :meth:`feed` so
    that the async client can await coroutines)."""

    def __init__(
        self,
        on_stdout: OutputHandler | None,
        on_stderr: OutputHandler | None,
        on_result: ResultHandler | None,
        on_error: ErrorHandler | None,
    ) -> None:
        self.execution = Execution()
        self.done = False
        self._h = (on_stdout, on_stderr, on_result, on_error)

    def feed(self, line: str) -> Any:
        """Handles one NDJSON line; returns what a handler returned (an
        awaitable, for async handlers) or None."""
        line = line.strip()
        if not line:
            return None
        try:
            ev = json.loads(line)
        except ValueError as e:
            raise WithRuntimeError(f"withruntime: bad event in code stream: {e}") from e
        if not isinstance(ev, dict):
            raise WithRuntimeError("withruntime: bad event in code stream: not a JSON object")
        ex = self.execution
        on_stdout, on_stderr, on_result, on_error = self._h
        t = ev.get("type")
        if t == "start":
            ex.context_id = str(ev.get("contextId", ""))
        elif t in ("stdout", "stderr"):
            text = str(ev.get("text", ""))
            (ex.logs.stdout if t == "stdout" else ex.logs.stderr).append(text)
            h = on_stdout if t == "stdout" else on_stderr
            if h is not None:
                return h(OutputMessage(text, error=t == "stderr"))
        elif t == "result" and isinstance(ev.get("result"), dict):
            r = Result.from_dict(ev["result"])
            ex.results.append(r)
            if on_result is not None:
                return on_result(r)
        elif t == "error" and isinstance(ev.get("error"), dict):
            xe = ExecutionError.from_dict(ev["error"])
            ex.error = xe
            if on_error is not None:
                return on_error(xe)
        elif t == "end":
            end = ev.get("execution")
            if not isinstance(end, dict):
                raise WithRuntimeError("withruntime: end event without an execution")
            err = ex.error
            ex._update(end)
            ex.error = ex.error or err
            self.done = True
        return None

    def finish(self) -> Execution:
        if not self.done:
            raise WithRuntimeError(
                "withruntime: code stream ended without an end event (the sandbox may have been stopped)"
            )
        return self.execution


def maybe_await(v: Any) -> Awaitable[Any] | None:
    """v if it is awaitable (an async handler's coroutine), else None."""
    return v if hasattr(v, "__await__") else None
