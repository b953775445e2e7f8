"""Runtime's sandbox tools for Pydantic AI: each tool is a
``pydantic_ai.Tool`` made with ``Tool.from_schema`` from the SDK's JSON
Schema and function.

::

    from pydantic_ai import Agent
    from withruntime import AsyncSandbox
    from withruntime_adapters.pydantic_ai import runtime_tools_for_pydantic_ai

    async with await AsyncSandbox.create(timeout_seconds=1800) as sbx:
        agent = Agent("openai:gpt-5", tools=runtime_tools_for_pydantic_ai(sbx))
        result = await agent.run("Write hello.py and run it")

The model sees each result's ``text``. Results the SDK marks ``isError``
(invalid arguments, no such file) are raised as ``pydantic_ai.ToolFailed``,
so the model gets a failed tool result saying what to fix, without spending
the tool's retry budget. A Runtime failure (sandbox gone, server
unreachable) raises ``WithRuntimeError`` and ends the run, unless the tools
were made with ``raise_errors=False``.

Switching off Pydantic AI's own local shell and file tools: an ``Agent`` has
only the tools and capabilities you give it, so leave out the
``LocalWorkspace`` capability (``pydantic_ai.capabilities.LocalWorkspace``:
host subprocesses and the host filesystem) and any ``Workspace`` built on
``pydantic_ai.workspaces.LocalWorkspaceBackend``.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Tool, ToolFailed

from ._common import RuntimeTool, Source, runtime_tools, text_of

__all__ = ["runtime_tools_for_pydantic_ai", "pydantic_ai_tool"]


def pydantic_ai_tool(tool: RuntimeTool) -> Tool[Any]:
    """One SDK tool as a Pydantic AI ``Tool``."""

    async def call(**arguments: Any) -> str:
        result = await tool.acall(arguments)
        if result.get("isError"):
            raise ToolFailed(text_of(result))
        return text_of(result)

    return Tool.from_schema(call, name=tool.name, description=tool.description, json_schema=tool.schema())


def runtime_tools_for_pydantic_ai(source: Source, *, raise_errors: bool = True) -> list[Tool[Any]]:
    """The four tools (runtime_exec, runtime_read_file, runtime_write_file,
    runtime_list_files) bound to a ``Sandbox`` or ``AsyncSandbox`` (or the
    functions ``withruntime.tools.sandbox_tools`` returned), as Pydantic AI
    ``Tool`` objects for ``Agent(tools=...)``."""
    return [pydantic_ai_tool(t) for t in runtime_tools(source, raise_errors=raise_errors)]
