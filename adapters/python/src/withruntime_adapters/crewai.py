"""Runtime's sandbox tools for CrewAI: each tool is a ``crewai.tools.BaseTool``
whose ``args_schema`` has the SDK's JSON Schema and whose ``_run`` /
``_arun`` run the SDK's function.

::

    from crewai import Agent, Crew, Task
    from withruntime import Sandbox
    from withruntime_adapters.crewai import runtime_crewai_tools

    with Sandbox.create(timeout_seconds=1800) as sbx:
        coder = Agent(role="coder", goal="...", backstory="...", llm=llm, tools=runtime_crewai_tools(sbx))
        task = Task(description="Write hello.py and run it", expected_output="its output", agent=coder)
        Crew(agents=[coder], tasks=[task]).kickoff()

The agent sees each result's ``text``. Results the SDK marks ``isError``
(invalid arguments, no such file) are returned as a
``crewai.tools.ToolFailure`` carrying that text, so CrewAI records the failed
call (see ``tool_failure_policy``) and the agent still reads what to fix. A
Runtime failure (sandbox gone, server unreachable) raises
``WithRuntimeError``, which CrewAI reports to the agent as a tool error,
unless the tools were made with ``raise_errors=False``.

Switching off CrewAI's own local code and file tools: an agent has only the
tools you give it, so leave out ``crewai_tools``' local ones (``FileReadTool``,
``FileWriterTool``, ``DirectoryReadTool``, ``DirectorySearchTool``, and in
older ``crewai_tools`` the ``CodeInterpreterTool`` with ``unsafe_mode=True``)
and keep ``Agent(allow_code_execution=False)`` (the default; the option is
deprecated).
"""

from __future__ import annotations

from typing import Any

from crewai.tools import BaseTool, ToolFailure
from pydantic import PrivateAttr

from ._common import RuntimeTool, Source, pydantic_args_model, runtime_tools, text_of

__all__ = ["runtime_crewai_tools", "RuntimeCrewAITool"]


def _answer(result: dict[str, Any]) -> str | ToolFailure:
    if result.get("isError"):
        return ToolFailure(message=text_of(result))
    return text_of(result)


class RuntimeCrewAITool(BaseTool):
    """A CrewAI ``BaseTool`` over one SDK tool."""

    _runtime_tool: RuntimeTool = PrivateAttr()

    def __init__(self, tool: RuntimeTool) -> None:
        super().__init__(name=tool.name, description=tool.description, args_schema=pydantic_args_model(tool))
        self._runtime_tool = tool

    @property
    def runtime_tool(self) -> RuntimeTool:
        return self._runtime_tool

    def _run(self, **arguments: Any) -> str | ToolFailure:
        return _answer(self._runtime_tool.call(arguments))

    async def _arun(self, **arguments: Any) -> str | ToolFailure:
        return _answer(await self._runtime_tool.acall(arguments))


def runtime_crewai_tools(source: Source, *, raise_errors: bool = True) -> list[RuntimeCrewAITool]:
    """The four tools (runtime_exec, runtime_read_file, runtime_write_file,
    runtime_list_files) bound to a ``Sandbox`` or ``AsyncSandbox`` (or the
    functions ``withruntime.tools.sandbox_tools`` returned), as CrewAI tools
    for ``Agent(tools=...)``."""
    return [RuntimeCrewAITool(t) for t in runtime_tools(source, raise_errors=raise_errors)]
