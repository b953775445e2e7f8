"""Runtime's sandbox tools for smolagents: each tool is a
``smolagents.Tool`` whose ``inputs`` come from the SDK's JSON Schema and
whose ``forward`` runs the SDK's function.

::

    from smolagents import ToolCallingAgent
    from withruntime import Sandbox
    from withruntime_adapters.smolagents import runtime_smol_tools

    with Sandbox.create(timeout_seconds=1800) as sbx:
        agent = ToolCallingAgent(tools=runtime_smol_tools(sbx), model=model)
        agent.run("Write hello.py and run it")

smolagents calls tools synchronously: give these tools a ``Sandbox`` (an
``AsyncSandbox``'s tools would each run on a new event loop). The model sees
each result's ``text``; an invalid call or a missing file is a result whose
text starts with ``error:`` and says what to fix. A Runtime failure (sandbox
gone, server unreachable) raises ``WithRuntimeError``, which smolagents shows
the model as a failed step, unless the tools were made with
``raise_errors=False``.

Switching off smolagents' own local code execution: a ``CodeAgent`` runs the
model's Python code in this process by default (``executor_type="local"``,
the ``LocalPythonExecutor``), and ``add_base_tools=True`` adds a local
``PythonInterpreterTool``. Use a ``ToolCallingAgent`` (its default
``add_base_tools=False``) with these tools, so that code runs only through
``runtime_exec`` in the sandbox; if you keep a ``CodeAgent``, give it a
remote ``executor_type``, not ``"local"``.
"""

from __future__ import annotations

from typing import Any

from smolagents import Tool

from ._common import RuntimeTool, Source, runtime_tools, text_of

__all__ = ["runtime_smol_tools", "RuntimeSmolTool"]

_TYPES = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean"}


class RuntimeSmolTool(Tool):
    """A smolagents ``Tool`` over one SDK tool."""

    skip_forward_signature_validation = True
    output_type = "string"

    def __init__(self, tool: RuntimeTool) -> None:
        schema = tool.definition.input_schema
        required = set(schema.get("required", []))
        self.runtime_tool = tool
        self.name = tool.name
        self.description = tool.description
        self.inputs = {}
        for name, prop in schema["properties"].items():
            spec: dict[str, Any] = {"type": _TYPES[prop["type"]], "description": prop["description"]}
            if name not in required:
                spec["nullable"] = True
            self.inputs[name] = spec
        super().__init__()

    def forward(self, **arguments: Any) -> str:  # type: ignore[override]
        return text_of(self.runtime_tool.call(arguments))


def runtime_smol_tools(source: Source, *, raise_errors: bool = True) -> list[RuntimeSmolTool]:
    """The four tools (runtime_exec, runtime_read_file, runtime_write_file,
    runtime_list_files) bound to a ``Sandbox`` (or the functions
    ``withruntime.tools.sandbox_tools`` returned), as smolagents tools."""
    return [RuntimeSmolTool(t) for t in runtime_tools(source, raise_errors=raise_errors)]
