"""OpenAI Agents SDK: ``Runner.run`` (the SDK's agent loop) with the SDK's
own scripted model (``agents.testing.ScriptedModel``), against a real
sandbox."""

from __future__ import annotations

import pytest

pytest.importorskip("agents")

from agents import Agent, FunctionTool, RunConfig, Runner  # noqa: E402
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402

from withruntime import AsyncSandbox  # noqa: E402
from withruntime.tools import definitions  # noqa: E402
from withruntime_adapters.openai_agents import runtime_function_tools  # noqa: E402

from .conftest import EXEC_ARGS, WRITE_ARGS, final_answer  # noqa: E402


def _tool_outputs(call: ModelCall) -> list[str]:
    return [
        str(item["output"])
        for item in call.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


async def test_runner_writes_and_runs_hello_py(async_sbx: AsyncSandbox) -> None:
    tools = runtime_function_tools(async_sbx)
    assert all(isinstance(t, FunctionTool) for t in tools)
    assert [(t.name, t.description, t.params_json_schema) for t in tools] == [
        (d.name, d.description, d.input_schema) for d in definitions()
    ]

    model = ScriptedModel(
        [
            [function_call("runtime_write_file", WRITE_ARGS, call_id="call_write")],
            [function_call("runtime_exec", EXEC_ARGS, call_id="call_exec")],
            ModelStep.respond(lambda call: [assistant_message(final_answer(_tool_outputs(call)[-1]))]),
        ]
    )
    agent = Agent(name="coder", instructions="Use the sandbox.", model=model, tools=tools)
    result = await Runner.run(
        agent, "Write hello.py that prints 6 * 7 and run it.", run_config=RunConfig(tracing_disabled=True)
    )
    model.assert_complete()

    # The loop handed each tool's result back to the model.
    outputs = _tool_outputs(model.calls[-1])
    assert outputs[0] == "wrote 13 bytes to /workspace/hello.py"
    assert outputs[1] == "exit_code: 0\nstdout:\n42\nstderr: (empty)"
    assert {t.name for t in model.calls[0].tools} == {d.name for d in definitions()}
    assert result.final_output == "hello.py printed 42"
    assert (await async_sbx.files.read_text("hello.py")) == "print(6 * 7)\n"
