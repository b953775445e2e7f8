"""smolagents: ``ToolCallingAgent.run`` (smolagents' ReAct loop) with a
scripted ``smolagents.Model`` (the shape of the ``FakeToolCallModel`` in
smolagents' own tests), against a real sandbox."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("smolagents")

from smolagents import ToolCallingAgent  # noqa: E402
from smolagents.memory import ActionStep  # noqa: E402
from smolagents.models import (  # noqa: E402
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
    get_tool_json_schema,
)

from withruntime import Sandbox  # noqa: E402
from withruntime.tools import definitions  # noqa: E402
from withruntime_adapters.smolagents import runtime_smol_tools  # noqa: E402

from .conftest import EXEC_ARGS, WRITE_ARGS, final_answer  # noqa: E402


def _text(message: ChatMessage) -> str:
    if isinstance(message.content, list):
        return "".join(part.get("text", "") for part in message.content)
    return message.content or ""


class ScriptedToolCallModel(Model):
    """Answers with tool calls: write hello.py, run it, then final_answer
    with what the run printed (read from the observation handed back)."""

    def __init__(self) -> None:
        super().__init__(model_id="scripted")
        self.seen: list[list[ChatMessage]] = []
        self.tools: list[str] = []

    def generate(self, messages: list[ChatMessage], stop_sequences: Any = None, response_format: Any = None,
                 tools_to_call_from: Any = None, **kwargs: Any) -> ChatMessage:  # fmt: skip
        self.seen.append(list(messages))
        self.tools = [t.name for t in tools_to_call_from or []]
        observations = [_text(m) for m in messages if m.role == MessageRole.TOOL_RESPONSE]
        if not observations:
            name, args = "runtime_write_file", WRITE_ARGS
        elif len(observations) == 1:
            name, args = "runtime_exec", EXEC_ARGS
        else:
            observed = observations[-1].split("Observation:\n", 1)[-1]
            name, args = "final_answer", {"answer": final_answer(observed)}
        call = ChatMessageToolCall(
            id=f"call_{len(self.seen)}",
            type="function",
            function=ChatMessageToolCallFunction(name=name, arguments=args),
        )
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[call])


def test_tool_calling_agent_writes_and_runs_hello_py(sbx: Sandbox) -> None:
    tools = runtime_smol_tools(sbx)
    for tool, d in zip(tools, definitions()):
        params = get_tool_json_schema(tool)["function"]["parameters"]
        assert (tool.name, tool.description) == (d.name, d.description)
        assert params == {k: v for k, v in d.input_schema.items() if k != "additionalProperties"}

    model = ScriptedToolCallModel()
    agent = ToolCallingAgent(tools=tools, model=model, max_steps=5)
    answer = agent.run("Write hello.py that prints 6 * 7 and run it.")

    assert set(model.tools) >= {d.name for d in definitions()}
    steps = [s for s in agent.memory.steps if isinstance(s, ActionStep)]
    assert [s.observations for s in steps[:2]] == [
        "wrote 13 bytes to /workspace/hello.py",
        "exit_code: 0\nstdout:\n42\nstderr: (empty)",
    ]
    assert len(model.seen) == 3
    assert answer == "hello.py printed 42"
