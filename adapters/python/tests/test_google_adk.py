"""Google ADK: ``InMemoryRunner.run_async`` over an ``LlmAgent`` (ADK's
agent loop: model turn, function calls, function responses, next turn) with
a scripted model, a ``google.adk.models.BaseLlm`` subclass (the pattern of
ADK's own ``testing_utils.MockModel``), against a real sandbox."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.models import BaseLlm, LlmRequest, LlmResponse  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.genai import types  # noqa: E402

from withruntime import AsyncSandbox  # noqa: E402
from withruntime.tools import definitions  # noqa: E402
from withruntime_adapters.google_adk import runtime_adk_tools  # noqa: E402

from .conftest import EXEC_ARGS, WRITE_ARGS, final_answer  # noqa: E402


def _responses(request: LlmRequest) -> list[types.FunctionResponse]:
    return [p.function_response for c in request.contents for p in c.parts or [] if p.function_response]


class ScriptedLlm(BaseLlm):
    """Answers from a script: write hello.py, run it, then a final answer
    made from the function response ADK handed back."""

    requests: list[LlmRequest] = []

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        responses = _responses(llm_request)
        if not responses:
            part = types.Part(
                function_call=types.FunctionCall(id="call_write", name="runtime_write_file", args=WRITE_ARGS)
            )
        elif len(responses) == 1:
            part = types.Part(function_call=types.FunctionCall(id="call_exec", name="runtime_exec", args=EXEC_ARGS))
        else:
            part = types.Part(text=final_answer(str(responses[-1].response["result"])))
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


async def test_runner_writes_and_runs_hello_py(async_sbx: AsyncSandbox) -> None:
    llm = ScriptedLlm(model="scripted", requests=[])
    agent = LlmAgent(name="coder", model=llm, instruction="Use the sandbox.", tools=runtime_adk_tools(async_sbx))
    runner = InMemoryRunner(agent=agent, app_name="runtime-test")
    session = await runner.session_service.create_session(app_name="runtime-test", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="Write hello.py that prints 6 * 7 and run it.")])
    events = [ev async for ev in runner.run_async(user_id="u", session_id=session.id, new_message=message)]

    declared = [fd for t in llm.requests[0].config.tools for fd in t.function_declarations or []]
    assert [(fd.name, fd.description, fd.parameters_json_schema) for fd in declared] == [
        (d.name, d.description, d.input_schema) for d in definitions()
    ]
    assert [(r.name, r.response) for r in _responses(llm.requests[-1])] == [
        ("runtime_write_file", {"result": "wrote 13 bytes to /workspace/hello.py"}),
        ("runtime_exec", {"result": "exit_code: 0\nstdout:\n42\nstderr: (empty)"}),
    ]
    assert len(llm.requests) == 3
    final = events[-1]
    assert final.is_final_response() and final.content.parts[0].text == "hello.py printed 42"


async def test_error_result(async_sbx: AsyncSandbox) -> None:
    read = runtime_adk_tools(async_sbx)[1]
    out: Any = await read.run_async(args={"path": "nope.py"}, tool_context=None)  # type: ignore[arg-type]
    assert list(out) == ["error"] and out["error"].startswith("error: ")
