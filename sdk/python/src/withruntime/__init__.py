"""Python SDK of Runtime, a self-hosted gVisor sandbox server for running a
language model's code.

::

    from withruntime import Sandbox

    with Sandbox.create(timeout_seconds=600) as sbx:   # destroyed on exit
        sbx.files.write_file("hello.py", "print(6 * 7)\\n")
        res = sbx.exec("python3 hello.py")
        # res.exit_code == 0, res.stdout == "42\\n"; a non-zero exit is a result too

The server is found in ``WITHRUNTIME_URL`` / ``WITHRUNTIME_API_KEY``, else
``~/.config/withruntime/config.json`` (``{"url", "apiKey"}``); see
:class:`Client`. ``withruntime.tools`` gives a model the four Runtime tools;
``withruntime.templates`` says how to make templates from images and
Dockerfiles; ``withruntime.terminal`` how to drive a program on a terminal
(``sbx.pty``).
"""

from ._async import AsyncClient, AsyncExecStream, AsyncFileReader, AsyncFiles, AsyncPty, AsyncSandbox, AsyncTerminal
from ._config import ENV_API_KEY, ENV_URL, config_path
from ._sync import Client, ExecStream, FileReader, Files, Pty, Sandbox, Terminal
from .code import (
    CODE_INTERPRETER_TEMPLATE,
    DEFAULT_CODE_TIMEOUT_SECONDS,
    CodeContext,
    Execution,
    ExecutionError,
    Logs,
    OutputMessage,
    Result,
)
from .errors import (
    ERROR_CODES,
    APIError,
    APITimeoutError,
    BadRequestError,
    ConflictError,
    CostCapError,
    ForbiddenError,
    InternalError,
    LeaseEndedError,
    MethodNotAllowedError,
    NoSpaceError,
    NotConfiguredError,
    NotFoundError,
    RangeNotSatisfiableError,
    RateLimitedError,
    SandboxGoneError,
    SandboxPausedError,
    SandboxStoppedError,
    ServerTimeoutError,
    SpendingLimitError,
    TerminalDisconnectedError,
    TooLargeError,
    TransportError,
    UnauthorizedError,
    UnavailableError,
    UnsupportedError,
    WithRuntimeError,
)
from .templates import Template, TemplateEvent, TemplateOrigin
from .terminal import (
    DEFAULT_TERM,
    MAX_PTY_COLS,
    MAX_PTY_ROWS,
    MAX_TERMINAL_MESSAGE_BYTES,
    MAX_TERMINAL_VIEWERS,
    TERMINAL_REPLAY_BYTES,
    PtySize,
    TerminalEvent,
    TerminalExit,
)
from .types import (
    DEFAULT_EXEC_TIMEOUT_SECONDS,
    DEFAULT_LIST_LIMIT,
    DEFAULT_MAX_OUTPUT_BYTES,
    MAX_LIST_LIMIT,
    MAX_MAX_OUTPUT_BYTES,
    TIMEOUT_EXIT_CODE,
    WORKSPACE,
    ErrorInfo,
    Event,
    ExecResult,
    FileInfo,
    FileListPage,
    GroupBy,
    KeyInfo,
    NetworkPolicy,
    SandboxInfo,
    SecretInfo,
    UsagePrices,
    UsageReport,
    UsageRow,
    UsageTrial,
)

__version__ = "0.1.0"

__all__ = [
    "Sandbox",
    "AsyncSandbox",
    "Client",
    "AsyncClient",
    "Files",
    "AsyncFiles",
    "ExecStream",
    "AsyncExecStream",
    "FileReader",
    "AsyncFileReader",
    "Pty",
    "AsyncPty",
    "Terminal",
    "AsyncTerminal",
    "PtySize",
    "TerminalEvent",
    "TerminalExit",
    "MAX_PTY_COLS",
    "MAX_PTY_ROWS",
    "MAX_TERMINAL_MESSAGE_BYTES",
    "TERMINAL_REPLAY_BYTES",
    "MAX_TERMINAL_VIEWERS",
    "DEFAULT_TERM",
    "SandboxInfo",
    "ExecResult",
    "Event",
    "ErrorInfo",
    "FileInfo",
    "FileListPage",
    "NetworkPolicy",
    "SecretInfo",
    "KeyInfo",
    "UsageRow",
    "UsagePrices",
    "UsageReport",
    "UsageTrial",
    "GroupBy",
    "Template",
    "TemplateOrigin",
    "TemplateEvent",
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
    "SandboxGoneError",
    "SandboxPausedError",
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
    "ENV_URL",
    "ENV_API_KEY",
    "config_path",
    "WORKSPACE",
    "DEFAULT_EXEC_TIMEOUT_SECONDS",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "MAX_MAX_OUTPUT_BYTES",
    "TIMEOUT_EXIT_CODE",
    "DEFAULT_LIST_LIMIT",
    "MAX_LIST_LIMIT",
    "CODE_INTERPRETER_TEMPLATE",
    "DEFAULT_CODE_TIMEOUT_SECONDS",
    "Execution",
    "Result",
    "Logs",
    "ExecutionError",
    "OutputMessage",
    "CodeContext",
    "__version__",
]
