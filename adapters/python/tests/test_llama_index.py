"""LlamaIndex: ``FunctionAgent.run`` (LlamaIndex's workflow agent loop) with
LlamaIndex's own scripted LLM, ``llama_index.core.llms.mock.MockFunctionCallingLLM``
(driven by a response generator), against a real sandbox."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult  # noqa: E402
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock  # noqa: E402
from llama_index.core.llms.mock import MockFunctionCallingLLM  # noqa: E402

from withruntime import AsyncSandbox, Sandbox  # noqa: E402
from withruntime.tools import definitions  # noqa: E402
from withruntime_adapters.llama_index import runtime_function_tools  # noqa: E402

from .conftest import EXEC_ARGS, WRITE_ARGS, final_answer  # noqa: E402


def _call(name: str, args: dict[str, Any], call_id: str) -> ChatMessage:
    return ChatMessage(
        role=MessageRole.ASSISTANT,
        blocks=[ToolCallBlock(tool_call_id=call_id, tool_name=name, tool_kwargs=args)],
    )


async def test_function_agent_writes_and_runs_hello_py(async_sbx: AsyncSandbox) -> None:
    tools = runtime_function_tools(async_sbx)
    assert [(t.metadata.name, t.metadata.description, t.metadata.get_parameters_dict()) for t in tools] == [
        (d.name, d.description, d.input_schema) for d in definitions()
    ]
    assert [t.metadata.to_openai_tool()["function"]["name"] for t in tools] == [d.name for d in definitions()]

    seen: list[list[ChatMessage]] = []

    def respond(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        seen.append(list(messages))
        assert [t.metadata.name for t in kwargs["tools"]] == [d.name for d in definitions()]
        results = [m for m in messages if m.role == MessageRole.TOOL]
        if not results:
            return _call("runtime_write_file", WRITE_ARGS, "call_write")
        if len(results) == 1:
            return _call("runtime_exec", EXEC_ARGS, "call_exec")
        return ChatMessage(role=MessageRole.ASSISTANT, content=final_answer(results[-1].content or ""))

    agent = FunctionAgent(
        tools=tools, llm=MockFunctionCallingLLM(response_generator=respond), system_prompt="Use the sandbox."
    )
    handler = agent.run("Write hello.py that prints 6 * 7 and run it.")
    tool_results = [ev async for ev in handler.stream_events() if isinstance(ev, ToolCallResult)]
    response = await handler

    assert [(r.tool_name, r.tool_output.content, r.tool_output.is_error) for r in tool_results] == [
        ("runtime_write_file", "wrote 13 bytes to /workspace/hello.py", False),
        ("runtime_exec", "exit_code: 0\nstdout:\n42\nstderr: (empty)", False),
    ]
    assert tool_results[1].tool_output.raw_output["data"]["exitCode"] == 0
    assert len(seen) == 3
    assert str(response) == "hello.py printed 42"


def test_sync_sandbox_and_error_result(sbx: Sandbox) -> None:
    run, read, write, ls = runtime_function_tools(sbx)
    assert write.call(**WRITE_ARGS).content == "wrote 13 bytes to /workspace/hello.py"
    out = run.call(command="python3 hello.py")
    assert (out.content, out.is_error) == ("exit_code: 0\nstdout:\n42\nstderr: (empty)", False)
    missing = read.call(path="nope.py")
    assert missing.is_error and missing.content.startswith("error: ")
