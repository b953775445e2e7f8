"""Runtime's sandbox tools for the OpenAI Agents SDK (``openai-agents``):
each tool is an ``agents.FunctionTool`` with the SDK's JSON Schema (strict
mode) whose ``on_invoke_tool`` runs the SDK's function.

::

    from agents import Agent, Runner
    from withruntime import AsyncSandbox
    from withruntime_adapters.openai_agents import runtime_function_tools

    async with await AsyncSandbox.create(timeout_seconds=1800) as sbx:
        agent = Agent(name="coder", instructions="...", tools=runtime_function_tools(sbx))
        result = await Runner.run(agent, "Write hello.py and run it")

The model sees each result's ``text``. Invalid arguments and failing
commands are results; a Runtime failure (sandbox gone, server unreachable)
raises ``WithRuntimeError`` and ends the run, unless the tools were made
with ``raise_errors=False`` (then the model gets the error as text).

Switching off the Agents SDK's own local shell and file tools: an ``Agent``
has exactly the tools in its ``tools`` list, so leave out ``LocalShellTool``,
``ShellTool`` with a local executor (``environment`` unset or
``{"type": "local"}``), ``ApplyPatchTool`` (its ``editor`` writes your
files) and ``ComputerTool``; and use a plain ``Agent``, not
``agents.sandbox.SandboxAgent`` with ``UnixLocalSandboxClient`` (which runs
its shell and file capabilities on this machine). Hosted tools
(``CodeInterpreterTool``, ``ShellTool`` with a hosted environment) run on
OpenAI's machines, not yours.
"""

from __future__ import annotations

from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from ._common import RuntimeTool, Source, runtime_tools, text_of

__all__ = ["runtime_function_tools", "function_tool"]


def function_tool(tool: RuntimeTool) -> FunctionTool:
    """One SDK tool as a ``FunctionTool``."""

    async def on_invoke_tool(ctx: ToolContext[Any], arguments: str) -> str:
        return text_of(await tool.acall(arguments))

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=tool.schema(),
        on_invoke_tool=on_invoke_tool,
        strict_json_schema=True,
    )


def runtime_function_tools(source: Source, *, raise_errors: bool = True) -> list[FunctionTool]:
    """The four tools (runtime_exec, runtime_read_file, runtime_write_file,
    runtime_list_files) bound to a ``Sandbox`` or ``AsyncSandbox`` (or the
    functions ``withruntime.tools.sandbox_tools`` returned), as
    ``FunctionTool`` objects for ``Agent(tools=...)``."""
    return [function_tool(t) for t in runtime_tools(source, raise_errors=raise_errors)]
