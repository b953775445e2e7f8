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

from agents import FunctionTool, ToolOutputImage, ToolOutputText
from agents.tool_context import ToolContext
from withruntime import AsyncSandbox, Sandbox

from ._common import RuntimeTool, Source, code_tools, images_of, runtime_tools, text_of

__all__ = ["runtime_function_tools", "code_interpreter_tools", "function_tool"]


def function_tool(tool: RuntimeTool) -> FunctionTool:
    """One SDK tool as a ``FunctionTool``."""

    async def on_invoke_tool(ctx: ToolContext[Any], arguments: str) -> str | list[ToolOutputText | ToolOutputImage]:
        result = await tool.acall(arguments)
        images = images_of(result)
        if not images:
            return text_of(result)
        # The SDK sends a list as a function_call_output of input_text and
        # input_image (data URL) parts.
        return [ToolOutputText(text=text_of(result))] + [
            ToolOutputImage(image_url=f"data:{img['mimeType']};base64,{img['data']}") for img in images
        ]

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


def code_interpreter_tools(sbx: Sandbox | AsyncSandbox, *, raise_errors: bool = True) -> list[FunctionTool]:
    """The code interpreter's tool, ``runtime_run_code`` (Python in a Jupyter
    kernel that keeps variables between calls), bound to ``sbx``, a sandbox
    of the ``code-interpreter`` template, as a one-element list of
    ``FunctionTool``; add it to the four tools as you like. A result with
    charts is given to the model as ``input_text`` then one ``input_image``
    (a PNG or JPEG data URL) per chart; without, as the text alone."""
    return [function_tool(t) for t in code_tools(sbx, raise_errors=raise_errors)]
