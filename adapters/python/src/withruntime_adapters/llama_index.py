"""Runtime's sandbox tools for LlamaIndex: each tool is a
``llama_index.core.tools.FunctionTool`` whose metadata carries the SDK's
name, description and JSON Schema and whose function is the SDK's. They work
in the workflow agents (``FunctionAgent``, ``ReActAgent``,
``AgentWorkflow``) and anywhere a LlamaIndex tool goes.

::

    from llama_index.core.agent.workflow import FunctionAgent
    from withruntime import AsyncSandbox
    from withruntime_adapters.llama_index import runtime_function_tools

    async with await AsyncSandbox.create(timeout_seconds=1800) as sbx:
        agent = FunctionAgent(tools=runtime_function_tools(sbx), llm=llm)
        response = await agent.run("Write hello.py and run it")

Each call returns a ``ToolOutput`` whose content is the result's ``text``,
whose ``raw_output`` is the whole SDK result (``{"text", "isError",
"data"}``) and whose ``is_error`` is the result's ``isError`` (invalid
arguments, no such file). A Runtime failure (sandbox gone, server
unreachable) raises ``WithRuntimeError``, unless the tools were made with
``raise_errors=False``.

Switching off LlamaIndex's own local code and file tools: an agent has only
the tools you give it, so leave out ``CodeInterpreterToolSpec``
(``llama-index-tools-code-interpreter``, which runs Python in a local
subprocess) and other tool specs that run commands or touch files on this
machine; and for ``CodeActAgent`` pass a ``code_execute_fn`` that runs the
code in the sandbox (for example by writing it with ``runtime_write_file`` and
running it with ``runtime_exec``), not one that ``exec``\\ s it locally.
"""

from __future__ import annotations

import copy
from typing import Any

from llama_index.core.tools import FunctionTool, ToolMetadata, ToolOutput

from ._common import RuntimeTool, Source, pydantic_args_model, runtime_tools, text_of

__all__ = ["runtime_function_tools", "RuntimeFunctionTool"]


class _Metadata(ToolMetadata):
    """The tool's metadata, whose parameters are the SDK's JSON Schema as it
    is (LlamaIndex's own keeps only some keys of a schema)."""

    def __init__(self, tool: RuntimeTool) -> None:
        super().__init__(name=tool.name, description=tool.description, fn_schema=pydantic_args_model(tool))
        self._schema = tool.schema()

    def get_parameters_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._schema)


class RuntimeFunctionTool(FunctionTool):
    """A ``FunctionTool`` over one SDK tool, whose output is the result's text
    (and ``is_error``)."""

    def __init__(self, tool: RuntimeTool) -> None:
        self.runtime_tool = tool

        def call(**arguments: Any) -> dict[str, Any]:
            return tool.call(arguments)

        async def acall(**arguments: Any) -> dict[str, Any]:
            return await tool.acall(arguments)

        super().__init__(
            fn=None if tool.is_async else call,
            async_fn=acall,
            metadata=_Metadata(tool),
        )

    def _output(self, out: ToolOutput) -> ToolOutput:
        result = out.raw_output
        return ToolOutput(
            tool_name=out.tool_name,
            content=text_of(result),
            raw_input=out.raw_input,
            raw_output=result,
            is_error=bool(result.get("isError")),
        )

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        return self._output(super().call(*args, **kwargs))

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        return self._output(await super().acall(*args, **kwargs))


def runtime_function_tools(source: Source, *, raise_errors: bool = True) -> list[RuntimeFunctionTool]:
    """The four tools (runtime_exec, runtime_read_file, runtime_write_file,
    runtime_list_files) bound to a ``Sandbox`` or ``AsyncSandbox`` (or the
    functions ``withruntime.tools.sandbox_tools`` returned), as LlamaIndex
    ``FunctionTool`` objects."""
    return [RuntimeFunctionTool(t) for t in runtime_tools(source, raise_errors=raise_errors)]
