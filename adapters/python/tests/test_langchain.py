"""LangChain / LangGraph: ``langchain.agents.create_agent`` (a LangGraph
graph: model node, ``ToolNode``, loop) with langchain_core's own fake chat
model, ``GenericFakeChatModel``, against a real sandbox."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.tools import StructuredTool  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402

from withruntime import Sandbox  # noqa: E402
from withruntime.tools import RUN_CODE_NAME, code_definitions, definitions  # noqa: E402
from withruntime_adapters.langchain import code_interpreter_tools, runtime_structured_tools  # noqa: E402

from .conftest import (  # noqa: E402
    CODE_CHART_ARGS,
    CODE_SET_ARGS,
    EXEC_ARGS,
    WRITE_ARGS,
    code_answer,
    final_answer,
    png_size,
)


class ScriptedChatModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` with tools bound (it answers from its script
    whatever the tools) and the messages of each call recorded."""

    seen: list[list[BaseMessage]] = []
    bound: list[Any] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        self.bound = [getattr(t, "name", None) for t in tools]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def _script(model: Callable[[], ScriptedChatModel]) -> Iterator[AIMessage]:
    yield AIMessage(content="", tool_calls=[{"name": "runtime_write_file", "args": WRITE_ARGS, "id": "call_write"}])
    yield AIMessage(content="", tool_calls=[{"name": "runtime_exec", "args": EXEC_ARGS, "id": "call_exec"}])
    # The last answer comes from the tool result the loop handed back.
    last = model().seen[-1][-1]
    assert isinstance(last, ToolMessage)
    yield AIMessage(content=final_answer(str(last.content)))


def test_create_agent_writes_and_runs_hello_py(sbx: Sandbox) -> None:
    tools = runtime_structured_tools(sbx)
    assert all(isinstance(t, StructuredTool) for t in tools)
    assert [(t.name, t.description, t.args) for t in tools] == [
        (d.name, d.description, d.input_schema["properties"]) for d in definitions()
    ]
    # What a provider is sent: the SDK's schema, unchanged.
    assert [convert_to_openai_tool(t)["function"]["parameters"] for t in tools] == [
        d.input_schema for d in definitions()
    ]

    holder: list[ScriptedChatModel] = []
    model = ScriptedChatModel(messages=_script(lambda: holder[0]), seen=[])
    holder.append(model)
    agent = create_agent(model, tools=tools, system_prompt="Use the sandbox.")
    state = agent.invoke({"messages": [("user", "Write hello.py that prints 6 * 7 and run it.")]})

    assert model.bound == [d.name for d in definitions()]
    tool_messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in tool_messages] == [
        "wrote 13 bytes to /workspace/hello.py",
        "exit_code: 0\nstdout:\n42\nstderr: (empty)",
    ]
    assert tool_messages[1].artifact["data"]["stdout"] == "42\n"
    assert len(model.seen) == 3
    assert state["messages"][-1].content == "hello.py printed 42"


async def test_error_result_is_a_tool_message_with_error_status(sbx: Sandbox) -> None:
    read = runtime_structured_tools(sbx)[1]
    msg = await read.ainvoke({"type": "tool_call", "name": read.name, "args": {"path": "nope.py"}, "id": "c1"})
    assert isinstance(msg, ToolMessage) and msg.status == "error"
    assert msg.content.startswith("error: ") and "nope.py" in msg.content


def _code_script(model: Callable[[], ScriptedChatModel]) -> Iterator[AIMessage]:
    yield AIMessage(content="", tool_calls=[{"name": RUN_CODE_NAME, "args": CODE_SET_ARGS, "id": "call_set"}])
    yield AIMessage(content="", tool_calls=[{"name": RUN_CODE_NAME, "args": CODE_CHART_ARGS, "id": "call_chart"}])
    results = [m for m in model().seen[-1] if isinstance(m, ToolMessage)]
    yield AIMessage(content=code_answer(results[0].text, results[1].text))


def test_create_agent_runs_code_and_gets_the_chart(code_sbx: Sandbox) -> None:
    tools = code_interpreter_tools(code_sbx)
    assert [convert_to_openai_tool(t)["function"]["parameters"] for t in tools] == [
        d.input_schema for d in code_definitions()
    ]
    holder: list[ScriptedChatModel] = []
    model = ScriptedChatModel(messages=_code_script(lambda: holder[0]), seen=[])
    holder.append(model)
    agent = create_agent(model, tools=tools, system_prompt="Use the kernel.")
    state = agent.invoke({"messages": [("user", "Sum xs, then chart it.")]})

    set_msg, chart_msg = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert isinstance(set_msg.content, str) and set_msg.content.startswith("execution_count: 1\nstdout:\n14")
    # The chart is a standard image content block after the summary's text.
    text, image = chart_msg.content
    assert text["type"] == "text" and image["type"] == "image" and image["mime_type"] == "image/png", chart_msg.content
    w, h = png_size(base64.b64decode(image["base64"]))
    assert w >= 100 and h >= 100
    assert chart_msg.artifact["images"][0]["data"] == image["base64"]
    assert state["messages"][-1].content == f"sum 14, max 5; display: image 1 (image/png, {w}x{h}) attached"
