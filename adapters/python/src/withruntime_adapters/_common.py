"""What every adapter shares: the SDK's four tools, each with its
declaration. Nothing here re-implements a tool: names, descriptions, JSON
Schemas, argument checks, limits and result text all come from
:mod:`withruntime.tools`."""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from withruntime import AsyncSandbox, Sandbox
from withruntime.tools import ToolDefinition, adispatch, code_interpreter_tools, dispatch, sandbox_tools

__all__ = ["RuntimeTool", "runtime_tools", "code_tools", "pydantic_args_model", "text_of", "images_of"]

#: What an adapter is made from: a sandbox (its four tools are made with
#: ``sandbox_tools``), or tools that ``sandbox_tools`` returned (all four or
#: some of them).
Source = Sandbox | AsyncSandbox | Sequence[Callable[..., Any]]


@dataclass(frozen=True)
class RuntimeTool:
    """One of the SDK's tools with its declaration."""

    #: The SDK function (a coroutine function for an AsyncSandbox's tools).
    fn: Callable[..., Any]

    @property
    def definition(self) -> ToolDefinition:
        return self.fn.definition  # type: ignore[attr-defined, no-any-return]

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def description(self) -> str:
        return self.definition.description

    def schema(self) -> dict[str, Any]:
        """A fresh copy of the tool's JSON Schema (the SDK's definitions)."""
        return copy.deepcopy(self.definition.input_schema)

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def call(self, arguments: str | bytes | Mapping[str, Any] | None) -> dict[str, Any]:
        """Runs the tool with the model's arguments (a JSON string or a dict)
        and returns the SDK's result ``{"text", "isError", "data"}``. Async
        tools are run to completion on a new event loop; from async code use
        :meth:`acall`."""
        if self.is_async:
            return asyncio.run(self.acall(arguments))
        return dict(dispatch([self.fn], self.name, arguments))

    async def acall(self, arguments: str | bytes | Mapping[str, Any] | None) -> dict[str, Any]:
        """:meth:`call` for async code: async tools are awaited, sync ones run
        in a worker thread so that the event loop is not blocked."""
        if self.is_async:
            return dict(await adispatch([self.fn], self.name, arguments))
        return await asyncio.to_thread(self.call, arguments)


def runtime_tools(source: Source, *, raise_errors: bool = True) -> list[RuntimeTool]:
    """The SDK's tools for ``source``: a :class:`~withruntime.Sandbox`, an
    :class:`~withruntime.AsyncSandbox`, or a list of functions from
    :func:`withruntime.tools.sandbox_tools`. ``raise_errors`` is passed to
    ``sandbox_tools`` (ignored for a list of functions)."""
    if isinstance(source, (Sandbox, AsyncSandbox)):
        fns: Sequence[Callable[..., Any]] = sandbox_tools(source, raise_errors=raise_errors)
    elif isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
        fns = list(source)
    else:
        raise TypeError(
            f"expected a withruntime Sandbox, AsyncSandbox or the functions of sandbox_tools(), not {type(source).__name__}"
        )
    out = []
    for fn in fns:
        if not isinstance(getattr(fn, "definition", None), ToolDefinition):
            raise TypeError(f"{fn!r} is not a tool from withruntime.tools.sandbox_tools()")
        out.append(RuntimeTool(fn))
    return out


def code_tools(sbx: Sandbox | AsyncSandbox, *, raise_errors: bool = True) -> list[RuntimeTool]:
    """The code interpreter's tool set, ``[runtime_run_code]``
    (``withruntime.tools.code_interpreter_tools``), for ``sbx``: a sandbox of
    the ``code-interpreter`` template (elsewhere the tool answers the model
    that the sandbox has no Python kernel)."""
    if not isinstance(sbx, (Sandbox, AsyncSandbox)):
        raise TypeError(f"expected a withruntime Sandbox or AsyncSandbox, not {type(sbx).__name__}")
    return [RuntimeTool(fn) for fn in code_interpreter_tools(sbx, raise_errors=raise_errors)]


def images_of(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The result's images (runtime_run_code's charts, checked by the SDK to
    decode): ``{"mimeType", "data" (base64), "width", "height"}`` each."""
    return list(result.get("images") or [])


def text_of(result: Mapping[str, Any]) -> str:
    """What the model sees of a result: its ``text``."""
    return str(result["text"])


def pydantic_args_model(tool: RuntimeTool) -> type[Any]:
    """A pydantic model for frameworks that take a tool's arguments as a
    pydantic class (CrewAI, LlamaIndex). Its JSON Schema is the SDK's schema
    unchanged; validation accepts whatever the model sent (every field
    optional, extra fields kept), so that the SDK's own checks answer the
    model with what to fix, as with every other adapter."""
    from pydantic import BaseModel, ConfigDict, create_model

    schema = tool.definition.input_schema
    fields: dict[str, Any] = {name: (Any, None) for name in schema["properties"]}
    base: type[BaseModel] = type(
        "_RuntimeArgs",
        (BaseModel,),
        {
            "model_config": ConfigDict(extra="allow"),
            "model_json_schema": classmethod(lambda cls, *a, **k: copy.deepcopy(schema)),
            "__module__": __name__,
        },
    )
    camel = "".join(part.capitalize() for part in tool.name.split("_"))
    model = create_model(camel + "Args", __base__=base, __module__=__name__, **fields)
    model.__doc__ = tool.description
    return model
