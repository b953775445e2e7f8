"""Pydantic AI: ``Agent.run`` (Pydantic AI's agent graph) with its own
scripted model, ``pydantic_ai.models.function.FunctionModel``, against a real
sandbox."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, Tool  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from withruntime import AsyncSandbox  # noqa: E402
from withruntime.tools import definitions  # noqa: E402
from withruntime_adapters.pydantic_ai import runtime_tools_for_pydantic_ai  # noqa: E402

from .conftest import EXEC_ARGS, WRITE_ARGS, final_answer  # noqa: E402


def _tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]


async def test_agent_writes_and_runs_hello_py(async_sbx: AsyncSandbox) -> None:
    tools = runtime_tools_for_pydantic_ai(async_sbx)
    assert all(isinstance(t, Tool) for t in tools)
    seen_tools: list[list[tuple[str, str | None, dict]]] = []

    def model_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen_tools.append([(t.name, t.description, t.parameters_json_schema) for t in info.function_tools])
        returns = _tool_returns(messages)
        if not returns:
            return ModelResponse(parts=[ToolCallPart("runtime_write_file", WRITE_ARGS, tool_call_id="call_write")])
        if len(returns) == 1:
            return ModelResponse(parts=[ToolCallPart("runtime_exec", EXEC_ARGS, tool_call_id="call_exec")])
        return ModelResponse(parts=[TextPart(final_answer(returns[-1].model_response_str()))])

    agent = Agent(FunctionModel(model_fn), tools=tools, instructions="Use the sandbox.")
    result = await agent.run("Write hello.py that prints 6 * 7 and run it.")

    assert seen_tools[0] == [(d.name, d.description, d.input_schema) for d in definitions()]
    returns = _tool_returns(result.all_messages())
    assert [(r.tool_name, r.content) for r in returns] == [
        ("runtime_write_file", "wrote 13 bytes to /workspace/hello.py"),
        ("runtime_exec", "exit_code: 0\nstdout:\n42\nstderr: (empty)"),
    ]
    assert result.output == "hello.py printed 42"


async def test_error_result_is_a_failed_tool_result(async_sbx: AsyncSandbox) -> None:
    def model_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        parts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]
        answers = [p for p in parts if isinstance(p, (ToolReturnPart, RetryPromptPart))]
        if not answers:
            return ModelResponse(parts=[ToolCallPart("runtime_read_file", {"path": "nope.py"}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart(answers[-1].model_response_str())])

    result = await Agent(FunctionModel(model_fn), tools=runtime_tools_for_pydantic_ai(async_sbx)).run("read nope.py")
    # A failed tool result (ToolFailed), not a retry prompt: the model reads the SDK's text.
    assert "error: " in result.output and "nope.py" in result.output
    assert "Fix the errors and try again" not in result.output, result.output
