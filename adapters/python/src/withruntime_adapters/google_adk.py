"""Runtime's sandbox tools for the Google Agent Development Kit (ADK): each
tool is a ``google.adk.tools.BaseTool`` whose declaration carries the SDK's
JSON Schema (``FunctionDeclaration.parameters_json_schema``) and whose
``run_async`` runs the SDK's function.

::

    from google.adk.agents import LlmAgent
    from google.adk.runners import InMemoryRunner
    from withruntime import AsyncSandbox
    from withruntime_adapters.google_adk import runtime_adk_tools

    async with await AsyncSandbox.create(timeout_seconds=1800) as sbx:
        agent = LlmAgent(name="coder", model="gemini-2.5-flash", tools=runtime_adk_tools(sbx))
        runner = InMemoryRunner(agent=agent)
        ...

Each call's function response is ``{"result": text}``, or ``{"error":
text}`` for a result the SDK marks ``isError`` (invalid arguments, no such
file), the text saying what to fix. A Runtime failure (sandbox gone, server
unreachable) raises ``WithRuntimeError`` and ends the run, unless the tools
were made with ``raise_errors=False``.

Switching off ADK's own local shell, file and code tools: an ``LlmAgent`` has
only the tools and code executor you give it, so leave out
``ExecuteBashTool`` (``google.adk.tools.bash_tool``), the
``EnvironmentToolset`` over a ``LocalEnvironment`` (its ``execute``,
``read_file``, ``write_file`` and ``edit_file`` tools act on this machine),
and don't set ``code_executor=UnsafeLocalCodeExecutor()`` (which ``exec``\\ s
the model's code in this process); leave ``code_executor`` unset so code runs
only through ``runtime_exec``.
"""

from __future__ import annotations

from typing import Any

from google.adk.tools import BaseTool, ToolContext
from google.genai import types

from ._common import RuntimeTool, Source, runtime_tools, text_of

__all__ = ["runtime_adk_tools", "RuntimeAdkTool"]


class RuntimeAdkTool(BaseTool):
    """An ADK ``BaseTool`` over one SDK tool."""

    def __init__(self, tool: RuntimeTool) -> None:
        super().__init__(name=tool.name, description=tool.description)
        self.runtime_tool = tool

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name, description=self.description, parameters_json_schema=self.runtime_tool.schema()
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> dict[str, str]:
        result = await self.runtime_tool.acall(args)
        return {"error" if result.get("isError") else "result": text_of(result)}


def runtime_adk_tools(source: Source, *, raise_errors: bool = True) -> list[RuntimeAdkTool]:
    """The four tools (runtime_exec, runtime_read_file, runtime_write_file,
    runtime_list_files) bound to a ``Sandbox`` or ``AsyncSandbox`` (or the
    functions ``withruntime.tools.sandbox_tools`` returned), as ADK tools for
    ``LlmAgent(tools=...)``."""
    return [RuntimeAdkTool(t) for t in runtime_tools(source, raise_errors=raise_errors)]
