"""A code-execution tool for a language model: four tools bound to one
Runtime sandbox, as plain Python functions.

::

    from withruntime import Sandbox
    from withruntime.tools import sandbox_tools

    with Sandbox.create(timeout_seconds=1800) as sbx:
        run, read, write, ls = sandbox_tools(sbx)
        print(run("python3 -c 'print(6*7)'"))
        # {'text': 'exit_code: 0\\nstdout:\\n42\\nstderr: (empty)', 'isError': False, 'data': {...}}

The tools are ``runtime_exec(command, cwd="", timeoutSeconds=0)``,
``runtime_read_file(path)``, ``runtime_write_file(path, content)`` and
``runtime_list_files(path="")`` — the same names, descriptions, JSON Schemas
(:func:`definitions`), limits and results as the Go SDK's
``sdk/go/tools``. Each returns a JSON-serializable dict,
``{"text", "isError", "data"}``: ``text`` is what the model should see.

Arguments are untrusted: a missing, mistyped or unknown argument comes back
as an error result (``isError`` true) that says what to fix; nothing
reaches the sandbox unchecked, and the function does not raise. A command
that exits non-zero is a plain result with its exit code.

When Runtime itself fails — the sandbox's lease ended, the server is
unreachable — the function raises the :class:`~withruntime.WithRuntimeError`
(with the result for the model in its ``tool_result`` attribute), as the Go
tools return an error; ``sandbox_tools(sbx, raise_errors=False)`` returns
that result instead.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, NotRequired, TypedDict, overload

from .._async import AsyncSandbox
from .._sync import Sandbox
from ..errors import WithRuntimeError
from . import _code, _run, _runner_async, _runner_sync
from ._args import ArgsError, Field, decode_args, parse_json_args
from ._run import (
    DEFAULT_TIMEOUT_SECONDS,
    EXEC_NAME,
    LIST_FILES_NAME,
    MAX_COMMAND_BYTES,
    MAX_CONTENT_BYTES,
    MAX_LIST_ENTRIES,
    MAX_OUTPUT_BYTES,
    MAX_PATH_BYTES,
    MAX_READ_BINARY_BYTES,
    MAX_READ_BYTES,
    MAX_READ_SCAN_BYTES,
    MAX_TIMEOUT_SECONDS,
    READ_FILE_NAME,
    WRITE_FILE_NAME,
    Failure,
)

__all__ = [
    "sandbox_tools",
    "code_interpreter_tools",
    "code_definitions",
    "anthropic_tool_result",
    "openai_responses_output",
    "gemini_parts",
    "RUN_CODE_NAME",
    "definitions",
    "ToolDefinition",
    "ToolResult",
    "dispatch",
    "adispatch",
    "openai_chat",
    "openai_responses",
    "anthropic",
    "gemini",
    "EXEC_NAME",
    "READ_FILE_NAME",
    "WRITE_FILE_NAME",
    "LIST_FILES_NAME",
    "TOOL_NAMES",
    "MAX_OUTPUT_BYTES",
    "MAX_READ_BYTES",
    "MAX_READ_BINARY_BYTES",
    "MAX_READ_SCAN_BYTES",
    "MAX_LIST_ENTRIES",
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_TIMEOUT_SECONDS",
    "MAX_COMMAND_BYTES",
    "MAX_PATH_BYTES",
    "MAX_CONTENT_BYTES",
]

#: The tools' names, in the order sandbox_tools returns them.
TOOL_NAMES = (EXEC_NAME, READ_FILE_NAME, WRITE_FILE_NAME, LIST_FILES_NAME)
#: The code interpreter's tool, a set of its own (code_interpreter_tools).
RUN_CODE_NAME = _code.RUN_CODE_NAME


class ToolResult(TypedDict):
    """What a tool returns (the JSON of the Go tools' ``Result``)."""

    #: What to give the model.
    text: str
    #: The call could not be carried out (invalid arguments, no such file,
    #: the sandbox is gone); ``text`` says why. A command that exited
    #: non-zero is not an error: its exit code is in ``text``.
    isError: bool
    #: The same result as a value for programs (the Go ExecOutput,
    #: ReadOutput, WriteOutput or ListOutput; runtime_run_code's Execution);
    #: absent for errors.
    data: NotRequired[dict[str, Any]]
    #: runtime_run_code's images, checked to decode, each {"mimeType",
    #: "data" (base64), "width", "height"}; see anthropic_tool_result,
    #: openai_responses_output and gemini_parts.
    images: NotRequired[list[dict[str, Any]]]


@dataclass(frozen=True)
class ToolDefinition:
    """A tool's declaration: its name, the description for the model and the
    JSON Schema of its arguments (the Go SDK's ``tools.Definition``)."""

    name: str
    description: str
    input_schema: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "description", "inputSchema"}`` (MCP's shape)."""
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}

    def to_json(self) -> str:
        """The declaration as the Go SDK's golden files write it."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"


def _load_definition(name: str) -> ToolDefinition:
    text = resources.files(__name__).joinpath("definitions", f"{name}.json").read_text(encoding="utf-8")
    d = json.loads(text)
    return ToolDefinition(name=d["name"], description=d["description"], input_schema=d["inputSchema"])


_DEFINITIONS: tuple[ToolDefinition, ...] = tuple(_load_definition(n) for n in TOOL_NAMES)
_CODE_DEFINITION = _load_definition(RUN_CODE_NAME)


def code_definitions() -> list[ToolDefinition]:
    """runtime_run_code's declaration (the code interpreter's tool set)."""
    d = _CODE_DEFINITION
    return [ToolDefinition(d.name, d.description, json.loads(json.dumps(d.input_schema)))]


def definitions() -> list[ToolDefinition]:
    """The four tools' declarations, in the order runtime_exec,
    runtime_read_file, runtime_write_file, runtime_list_files. Each call
    returns fresh copies."""
    return [ToolDefinition(d.name, d.description, json.loads(json.dumps(d.input_schema))) for d in _DEFINITIONS]


def _defs_of(tools: Iterable[Any] | None) -> list[ToolDefinition]:
    if tools is None:
        return definitions()
    out = []
    for t in tools:
        if isinstance(t, ToolDefinition):
            out.append(t)
        else:
            d = getattr(t, "definition", None)
            if not isinstance(d, ToolDefinition):
                raise TypeError(f"{t!r} is not a Runtime tool or ToolDefinition")
            out.append(d)
    return out


def openai_chat(tools: Iterable[Any] | None = None) -> list[dict[str, Any]]:
    """Declarations for OpenAI Chat Completions ``tools`` (strict mode)."""
    return [
        {
            "type": "function",
            "function": {"name": d.name, "description": d.description, "parameters": d.input_schema, "strict": True},
        }
        for d in _defs_of(tools)
    ]


def openai_responses(tools: Iterable[Any] | None = None) -> list[dict[str, Any]]:
    """Declarations for the OpenAI Responses API ``tools`` (strict mode)."""
    return [
        {"type": "function", "name": d.name, "description": d.description, "parameters": d.input_schema, "strict": True}
        for d in _defs_of(tools)
    ]


def anthropic(tools: Iterable[Any] | None = None) -> list[dict[str, Any]]:
    """Declarations for Anthropic's Messages API ``tools``."""
    return [{"name": d.name, "description": d.description, "input_schema": d.input_schema} for d in _defs_of(tools)]


def gemini(tools: Iterable[Any] | None = None) -> list[dict[str, Any]]:
    """Gemini ``functionDeclarations``, with the schema as ``parametersJsonSchema``."""
    return [
        {"name": d.name, "description": d.description, "parametersJsonSchema": d.input_schema} for d in _defs_of(tools)
    ]


# -- the tools' arguments ------------------------------------------------


@dataclass(frozen=True)
class _Spec:
    definition: ToolDefinition
    example: str
    fields: tuple[Field, ...]
    check: Callable[[dict[str, str], dict[str, int]], str] | None
    #: The Python parameters: (name, annotation, default or inspect.Parameter.empty).
    params: tuple[tuple[str, type, Any], ...]


_E = inspect.Parameter.empty

_SPECS: dict[str, _Spec] = {
    EXEC_NAME: _Spec(
        _DEFINITIONS[0],
        '{"command": "python3 hello.py", "cwd": "", "timeoutSeconds": 0}',
        (
            Field("command", essential=True, max=MAX_COMMAND_BYTES),
            Field("cwd", max=MAX_PATH_BYTES),
            Field("timeoutSeconds", integer=True),
        ),
        _run.check_exec,
        (("command", str, _E), ("cwd", str, ""), ("timeoutSeconds", int, 0)),
    ),
    READ_FILE_NAME: _Spec(
        _DEFINITIONS[1],
        '{"path": "hello.py"}',
        (Field("path", essential=True, max=MAX_PATH_BYTES),),
        _run.check_read,
        (("path", str, _E),),
    ),
    WRITE_FILE_NAME: _Spec(
        _DEFINITIONS[2],
        '{"path": "hello.py", "content": "print(6 * 7)\\n"}',
        (Field("path", essential=True, max=MAX_PATH_BYTES), Field("content", essential=True, max=MAX_CONTENT_BYTES)),
        _run.check_write,
        (("path", str, _E), ("content", str, _E)),
    ),
    LIST_FILES_NAME: _Spec(
        _DEFINITIONS[3],
        '{"path": ""}',
        (Field("path", max=MAX_PATH_BYTES),),
        None,
        (("path", str, ""),),
    ),
    RUN_CODE_NAME: _Spec(
        _CODE_DEFINITION,
        '{"code": "x = 6 * 7\\nx", "language": ""}',
        (Field("code", essential=True, max=_code.MAX_CODE_BYTES), Field("language", max=64)),
        _code.check_run_code,
        (("code", str, _E), ("language", str, "")),
    ),
}


def _invalid(spec: _Spec, msg: str) -> dict[str, Any]:
    return _run.error_result(f"invalid arguments for {spec.definition.name}: {msg}. Expected arguments: {spec.example}")


def _bind_call(spec: _Spec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments object of a Python call: keyword arguments, positional
    ones in the schema's order, or one dict (the model's arguments as they
    are). Raises ArgsError."""
    if len(args) == 1 and not kwargs and isinstance(args[0], Mapping):
        return dict(args[0])
    names = [p[0] for p in spec.params]
    if len(args) > len(names):
        raise ArgsError(
            f"{spec.definition.name} takes at most {len(names)} arguments ({', '.join(names)}), not {len(args)}"
        )
    obj: dict[str, Any] = {}
    for name, value in zip(names, args):
        obj[name] = value
    for k, v in kwargs.items():
        if k in obj:
            raise ArgsError(f'"{k}" was given twice')
        obj[k] = v
    return obj


def _checked(spec: _Spec, obj: dict[str, Any]) -> tuple[dict[str, str], dict[str, int]] | dict[str, Any]:
    """The checked arguments, or the error result for invalid ones."""
    try:
        s, n = decode_args(obj, spec.fields)
    except ArgsError as e:
        return _invalid(spec, str(e))
    if spec.check is not None:
        msg = spec.check(s, n)
        if msg:
            return _run.error_result(msg)
    return s, n


# -- running: _runner_async.py, and _runner_sync.py generated from it ----


def _failed(spec: _Spec, f: Failure, raise_errors: bool) -> dict[str, Any]:
    if not raise_errors:
        return f.result
    err = f.err
    try:
        err.tool_result = f.result  # type: ignore[attr-defined]
    except AttributeError:  # pragma: no cover
        pass
    raise err from err.__cause__


def _caught(spec: _Spec, e: Exception, raise_errors: bool) -> dict[str, Any]:
    """The answer to a run that raised ``e`` (or ``e`` raised again, with
    ``raise_errors``): a Failure's result, a sandbox error's, or an
    internal error's."""
    if isinstance(e, Failure):
        return _failed(spec, e, raise_errors)
    if isinstance(e, WithRuntimeError):
        return _failed(spec, Failure(_run.sandbox_error_result(e), e), raise_errors)
    return _internal(spec, e, raise_errors)


def _internal(spec: _Spec, e: Exception, raise_errors: bool) -> dict[str, Any]:
    res = _run.error_result(f"internal error in {spec.definition.name}; the call was not completed")
    if not raise_errors:
        return res
    try:
        e.tool_result = res  # type: ignore[attr-defined]
    except AttributeError:  # pragma: no cover
        pass
    raise e


# -- building the functions ----------------------------------------------


def _docstring(spec: _Spec) -> str:
    d = spec.definition
    lines = [d.description, "", "Args:"]
    for name, _, _ in spec.params:
        desc = d.input_schema["properties"][name]["description"]
        lines.append(f"    {name}: {desc}")
    lines += [
        "",
        "Returns:",
        '    A JSON-serializable dict: "text" (the result to show the model), "isError" and "data".',
    ]
    return "\n".join(lines)


def _signature(spec: _Spec) -> inspect.Signature:
    params = [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=ann)
        for name, ann, default in spec.params
    ]
    return inspect.Signature(params, return_annotation=ToolResult)


def _decorate(fn: Callable[..., Any], spec: _Spec) -> None:
    name = spec.definition.name
    fn.__name__ = name
    fn.__qualname__ = name
    fn.__module__ = __name__
    fn.__doc__ = _docstring(spec)
    fn.__signature__ = _signature(spec)  # type: ignore[attr-defined]
    ann: dict[str, Any] = {p[0]: p[1] for p in spec.params}
    ann["return"] = ToolResult
    fn.__annotations__ = ann
    fn.definition = spec.definition  # type: ignore[attr-defined]
    fn.input_schema = spec.definition.input_schema  # type: ignore[attr-defined]


def _make_sync(spec: _Spec, sbx: Sandbox, raise_errors: bool) -> Callable[..., ToolResult]:
    def tool(*args: Any, **kwargs: Any) -> ToolResult:
        try:
            obj = _bind_call(spec, args, kwargs)
        except ArgsError as e:
            return _invalid(spec, str(e))  # type: ignore[return-value]
        return _call_sync(spec, sbx, obj, raise_errors)  # type: ignore[return-value]

    _decorate(tool, spec)
    tool._call = lambda obj: _call_sync(spec, sbx, obj, raise_errors)  # type: ignore[attr-defined]
    return tool


def _call_sync(spec: _Spec, sbx: Sandbox, obj: dict[str, Any], raise_errors: bool) -> dict[str, Any]:
    checked = _checked(spec, obj)
    if isinstance(checked, dict):
        return checked
    try:
        return _runner_sync.run(spec.definition.name, sbx, *checked)
    except Exception as e:
        return _caught(spec, e, raise_errors)


def _make_async(spec: _Spec, sbx: AsyncSandbox, raise_errors: bool) -> Callable[..., Awaitable[ToolResult]]:
    async def tool(*args: Any, **kwargs: Any) -> ToolResult:
        try:
            obj = _bind_call(spec, args, kwargs)
        except ArgsError as e:
            return _invalid(spec, str(e))  # type: ignore[return-value]
        return await _call_async(spec, sbx, obj, raise_errors)  # type: ignore[return-value]

    _decorate(tool, spec)
    tool._call = lambda obj: _call_async(spec, sbx, obj, raise_errors)  # type: ignore[attr-defined]
    return tool


async def _call_async(spec: _Spec, sbx: AsyncSandbox, obj: dict[str, Any], raise_errors: bool) -> dict[str, Any]:
    checked = _checked(spec, obj)
    if isinstance(checked, dict):
        return checked
    try:
        return await _runner_async.run(spec.definition.name, sbx, *checked)
    except Exception as e:
        return _caught(spec, e, raise_errors)


SyncTool = Callable[..., ToolResult]
AsyncTool = Callable[..., Awaitable[ToolResult]]


@overload
def sandbox_tools(sbx: Sandbox, *, raise_errors: bool = True) -> list[SyncTool]: ...
@overload
def sandbox_tools(sbx: AsyncSandbox, *, raise_errors: bool = True) -> list[AsyncTool]: ...


def sandbox_tools(sbx: Sandbox | AsyncSandbox, *, raise_errors: bool = True) -> list[SyncTool] | list[AsyncTool]:
    """The four tools bound to ``sbx``, in the order runtime_exec,
    runtime_read_file, runtime_write_file, runtime_list_files: plain
    functions (coroutine functions for an :class:`~withruntime.AsyncSandbox`)
    named after the tools, with type hints and docstrings.

    Invalid arguments and failed commands are results, never exceptions.
    With ``raise_errors`` (the default), a Runtime failure (sandbox gone,
    server unreachable) raises its WithRuntimeError, whose ``tool_result``
    holds the result for the model; with ``raise_errors=False`` that result
    is returned instead.
    """
    if isinstance(sbx, AsyncSandbox):
        return [_make_async(_SPECS[n], sbx, raise_errors) for n in TOOL_NAMES]
    if isinstance(sbx, Sandbox):
        return [_make_sync(_SPECS[n], sbx, raise_errors) for n in TOOL_NAMES]
    raise TypeError(f"sandbox_tools needs a Sandbox or an AsyncSandbox, not {type(sbx).__name__}")


@overload
def code_interpreter_tools(sbx: Sandbox, *, raise_errors: bool = True) -> list[SyncTool]: ...
@overload
def code_interpreter_tools(sbx: AsyncSandbox, *, raise_errors: bool = True) -> list[AsyncTool]: ...


def code_interpreter_tools(
    sbx: Sandbox | AsyncSandbox, *, raise_errors: bool = True
) -> list[SyncTool] | list[AsyncTool]:
    """The code interpreter's tool set, ``[runtime_run_code]``, bound to
    ``sbx`` (a sandbox of the ``code-interpreter`` template): Python in a
    Jupyter kernel that keeps variables between calls. Its result's ``text``
    is for every provider; ``images`` (charts, checked to decode) go to
    providers that take images in tool results through
    :func:`anthropic_tool_result`, :func:`openai_responses_output` and
    :func:`gemini_parts`. Combine with :func:`sandbox_tools` as you like;
    the four tools are unchanged."""
    spec = _SPECS[RUN_CODE_NAME]
    if isinstance(sbx, AsyncSandbox):
        return [_make_async(spec, sbx, raise_errors)]
    if isinstance(sbx, Sandbox):
        return [_make_sync(spec, sbx, raise_errors)]
    raise TypeError(f"code_interpreter_tools needs a Sandbox or an AsyncSandbox, not {type(sbx).__name__}")


def anthropic_tool_result(result: Mapping[str, Any], tool_use_id: str) -> dict[str, Any]:
    """The Anthropic ``tool_result`` block answering ``tool_use_id``: a text
    block, then an image block per image."""
    content: list[dict[str, Any]] = [{"type": "text", "text": result["text"]}]
    for img in result.get("images") or []:
        content.append(
            {"type": "image", "source": {"type": "base64", "media_type": img["mimeType"], "data": img["data"]}}
        )
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if result.get("isError"):
        block["is_error"] = True
    return block


def openai_responses_output(result: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    """The OpenAI Responses ``function_call_output`` answering ``call_id``,
    its output a list: ``input_text``, then an ``input_image`` (data URL) per
    image."""
    parts: list[dict[str, Any]] = [{"type": "input_text", "text": result["text"]}]
    for img in result.get("images") or []:
        parts.append({"type": "input_image", "image_url": f"data:{img['mimeType']};base64,{img['data']}"})
    return {"type": "function_call_output", "call_id": call_id, "output": parts}


def gemini_parts(result: Mapping[str, Any], name: str, call_id: str = "") -> list[dict[str, Any]]:
    """Gemini parts answering a functionCall: the ``functionResponse`` (its
    response ``{"output"}``, or ``{"error"}`` for an error result), then an
    ``inlineData`` part per image."""
    body: dict[str, Any] = {"name": name, "response": {"error" if result.get("isError") else "output": result["text"]}}
    if call_id:
        body = {"id": call_id, **body}
    parts: list[dict[str, Any]] = [{"functionResponse": body}]
    for img in result.get("images") or []:
        parts.append({"inlineData": {"mimeType": img["mimeType"], "data": img["data"]}})
    return parts


ToolCollection = Mapping[str, Callable[..., Any]] | Sequence[Callable[..., Any]]


def _find(tools: ToolCollection, name: str) -> Callable[..., Any] | None:
    if isinstance(tools, Mapping):
        return tools.get(name)
    for t in tools:
        if getattr(t, "__name__", None) == name:
            return t
    return None


def _names(tools: ToolCollection) -> str:
    names = list(tools) if isinstance(tools, Mapping) else [getattr(t, "__name__", "?") for t in tools]
    return ", ".join(names)


def _prepare(tools: ToolCollection, name: str, arguments: Any) -> tuple[Callable[..., Any] | None, Any]:
    """The tool and its arguments object, or (None, the error result)."""
    t = _find(tools, name)
    if t is None:
        return None, _run.error_result(f"there is no tool {json.dumps(name)}; the tools are {_names(tools)}")
    if isinstance(arguments, (str, bytes, bytearray)) or arguments is None:
        try:
            arguments = parse_json_args(arguments)
        except ArgsError as e:
            spec = _SPECS.get(name)
            if spec is None:
                return None, _run.error_result(f"invalid arguments for {name}: {e}")
            return None, _invalid(spec, str(e))
    elif not isinstance(arguments, Mapping):
        spec = _SPECS.get(name)
        msg = "the arguments must be one JSON object"
        return None, _invalid(spec, msg) if spec else _run.error_result(msg)
    return t, dict(arguments)


def dispatch(tools: ToolCollection, name: str, arguments: str | bytes | Mapping[str, Any] | None) -> ToolResult:
    """Runs the tool called ``name`` with the model's ``arguments`` (a JSON
    object as text, or a dict). An unknown name or unparsable arguments are
    error results naming what there is."""
    t, obj = _prepare(tools, name, arguments)
    if t is None:
        return obj  # type: ignore[no-any-return]
    call = getattr(t, "_call", None)
    if call is not None:
        return call(obj)  # type: ignore[no-any-return]
    return t(**obj)  # type: ignore[no-any-return]


async def adispatch(tools: ToolCollection, name: str, arguments: str | bytes | Mapping[str, Any] | None) -> ToolResult:
    """:func:`dispatch` for the async tools (those of an AsyncSandbox)."""
    t, obj = _prepare(tools, name, arguments)
    if t is None:
        return obj  # type: ignore[no-any-return]
    call = getattr(t, "_call", None)
    r = call(obj) if call is not None else t(**obj)
    if inspect.isawaitable(r):
        r = await r
    return r  # type: ignore[no-any-return]
