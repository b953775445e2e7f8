"""OpenAI Agents SDK: ``Runner.run`` (the SDK's agent loop) with the SDK's
own scripted model (``agents.testing.ScriptedModel``), against a real
sandbox."""

from __future__ import annotations

import base64

import pytest

pytest.importorskip("agents")

from agents import Agent, FunctionTool, RunConfig, Runner  # noqa: E402
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402

from withruntime import AsyncSandbox  # noqa: E402
from withruntime.tools import RUN_CODE_NAME, code_definitions, definitions  # noqa: E402
from withruntime_adapters.openai_agents import code_interpreter_tools, runtime_function_tools  # noqa: E402

from .conftest import (  # noqa: E402
    CODE_CHART_ARGS,
    CODE_SET_ARGS,
    EXEC_ARGS,
    WRITE_ARGS,
    code_answer,
    final_answer,
    png_size,
)


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


def _output_text(output: object) -> str:
    """The text of a function_call_output's output (a string, or a list of
    input_text/input_image parts)."""
    if isinstance(output, str):
        return output
    assert isinstance(output, list), output
    return "".join(p["text"] for p in output if p.get("type") == "input_text")


async def test_runner_runs_code_and_gets_the_chart(async_code_sbx: AsyncSandbox) -> None:
    tools = code_interpreter_tools(async_code_sbx)
    assert [(t.name, t.params_json_schema) for t in tools] == [(d.name, d.input_schema) for d in code_definitions()]

    def answer(call: ModelCall) -> list[object]:
        outs = [
            item["output"]
            for item in call.input
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        return [assistant_message(code_answer(_output_text(outs[0]), _output_text(outs[1])))]

    model = ScriptedModel(
        [
            [function_call(RUN_CODE_NAME, CODE_SET_ARGS, call_id="call_set")],
            [function_call(RUN_CODE_NAME, CODE_CHART_ARGS, call_id="call_chart")],
            ModelStep.respond(answer),
        ]
    )
    agent = Agent(name="analyst", instructions="Use the kernel.", model=model, tools=tools)
    result = await Runner.run(agent, "Sum xs, then chart it.", run_config=RunConfig(tracing_disabled=True))
    model.assert_complete()

    # The loop handed the model the chart as an input_image (a PNG data URL)
    # after the summary's text.
    outs = [
        item["output"]
        for item in model.calls[-1].input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    assert isinstance(outs[0], str) and outs[0].startswith("execution_count: 1\nstdout:\n14"), outs[0]
    text, image = outs[1]
    assert text["type"] == "input_text" and image["type"] == "input_image", outs[1]
    prefix = "data:image/png;base64,"
    assert image["image_url"].startswith(prefix)
    w, h = png_size(base64.b64decode(image["image_url"][len(prefix) :]))
    assert w >= 100 and h >= 100
    # And the final answer came from what the loop handed back.
    assert result.final_output == f"sum 14, max 5; display: image 1 (image/png, {w}x{h}) attached", result.final_output
