"""Runtime's sandbox tools for LangChain and LangGraph: each tool is a
``langchain_core.tools.StructuredTool`` whose ``args_schema`` is the SDK's
JSON Schema and whose function is the SDK's. They work wherever LangChain
tools do: ``langchain.agents.create_agent``, LangGraph's ``ToolNode`` /
``create_react_agent``, ``model.bind_tools(...)``.

::

    from langchain.agents import create_agent
    from withruntime import Sandbox
    from withruntime_adapters.langchain import runtime_structured_tools

    with Sandbox.create(timeout_seconds=1800) as sbx:
        agent = create_agent(model, tools=runtime_structured_tools(sbx))
        state = agent.invoke({"messages": [("user", "Write hello.py and run it")]})

Results: the ``ToolMessage`` content is the result's ``text``, and its
``artifact`` the whole SDK result (``{"text", "isError", "data"}``, with the
exit code and output in ``data``). Invalid arguments, a missing file and the
like come back as a ``ToolMessage`` with ``status="error"`` and the text
saying what to fix. A Runtime failure (sandbox gone, server unreachable)
raises ``WithRuntimeError`` and ends the run, unless the tools were made with
``raise_errors=False``.

Given an ``AsyncSandbox`` the tools are async only (use ``ainvoke`` /
``astream``); given a ``Sandbox`` they work both ways (async calls run the
sync tool in a worker thread).

Switching off LangChain's own local shell and file tools: an agent has only
the tools you pass it, so don't add ``ShellToolMiddleware`` (with its default
``HostExecutionPolicy`` it runs a shell on this machine) or
``FilesystemFileSearchMiddleware`` (glob/grep over a local directory) to
``create_agent(middleware=...)``; don't add ``langchain_community``'s
``ShellTool`` or ``FileManagementToolkit`` tools (``ReadFileTool``,
``WriteFileTool``, ...) or ``langchain_experimental``'s ``PythonREPLTool``;
and in Deep Agents (``deepagents``) keep the default state backend (or a
store backend), not ``FilesystemBackend`` or ``LocalShellBackend``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import StructuredTool, ToolException

from withruntime import AsyncSandbox, Sandbox

from ._common import RuntimeTool, Source, code_tools, images_of, runtime_tools, text_of

__all__ = ["runtime_structured_tools", "code_interpreter_tools", "structured_tool"]

Content = str | list[dict[str, Any]]


def _answer(result: dict[str, Any]) -> tuple[Content, dict[str, Any]]:
    if result.get("isError"):
        raise ToolException(text_of(result))  # handle_tool_error=True: a ToolMessage with status="error"
    images = images_of(result)
    if not images:
        return text_of(result), result
    # LangChain's standard content blocks: chat models that take images in
    # tool results translate them to their provider's shape.
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text_of(result)}]
    blocks += [{"type": "image", "base64": img["data"], "mime_type": img["mimeType"]} for img in images]
    return blocks, result


def structured_tool(tool: RuntimeTool) -> StructuredTool:
    """One SDK tool as a ``StructuredTool``."""

    async def acall(**arguments: Any) -> tuple[Content, dict[str, Any]]:
        return _answer(await tool.acall(arguments))

    def call(**arguments: Any) -> tuple[Content, dict[str, Any]]:
        return _answer(tool.call(arguments))

    return StructuredTool.from_function(
        func=None if tool.is_async else call,
        coroutine=acall,
        name=tool.name,
        description=tool.description,
        args_schema=tool.schema(),
        infer_schema=False,
        response_format="content_and_artifact",
        handle_tool_error=True,
    )


def runtime_structured_tools(source: Source, *, raise_errors: bool = True) -> list[StructuredTool]:
    """The four tools (runtime_exec, runtime_read_file, runtime_write_file,
    runtime_list_files) bound to a ``Sandbox`` or ``AsyncSandbox`` (or the
    functions ``withruntime.tools.sandbox_tools`` returned), as
    ``StructuredTool`` objects."""
    return [structured_tool(t) for t in runtime_tools(source, raise_errors=raise_errors)]


def code_interpreter_tools(sbx: Sandbox | AsyncSandbox, *, raise_errors: bool = True) -> list[StructuredTool]:
    """The code interpreter's tool, ``runtime_run_code`` (Python in a Jupyter
    kernel that keeps variables between calls), bound to ``sbx``, a sandbox
    of the ``code-interpreter`` template, as a one-element list of
    ``StructuredTool``; add it to the four tools as you like. A result with
    charts is a ``ToolMessage`` whose content is a list of standard content
    blocks, a ``text`` block then one ``image`` block (``base64``,
    ``mime_type``) per chart; without, the text alone. The ``artifact`` is
    the whole SDK result, ``images`` included."""
    return [structured_tool(t) for t in code_tools(sbx, raise_errors=raise_errors)]
