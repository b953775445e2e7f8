"""CrewAI: ``Crew.kickoff`` (CrewAI's agent executor, native tool calling)
with a custom LLM, a ``crewai.llms.base_llm.BaseLLM`` subclass that answers
from a script, against a real sandbox."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

# No telemetry or tracing from a test run (this machine reaches no service).
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_DISABLE_TRACKING", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

pytest.importorskip("crewai")

from crewai import Agent, Crew, Task  # noqa: E402
from crewai.llms.base_llm import BaseLLM  # noqa: E402
from crewai.tools import BaseTool, ToolFailure  # noqa: E402

from withruntime import Sandbox  # noqa: E402
from withruntime.tools import definitions  # noqa: E402
from withruntime_adapters.crewai import runtime_crewai_tools  # noqa: E402

from .conftest import EXEC_ARGS, WRITE_ARGS, final_answer  # noqa: E402


def _tool_call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


class ScriptedLLM(BaseLLM):
    """A custom CrewAI LLM with native function calling that answers from a
    script: write hello.py, run it, then a final answer made from the tool
    result CrewAI handed back."""

    calls: list[dict[str, Any]] = []

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None) -> Any:  # fmt: skip
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        self.calls.append({"messages": list(messages), "tools": tools})
        results = [m for m in messages if m.get("role") == "tool"]
        if not results:
            return [_tool_call("runtime_write_file", WRITE_ARGS, "call_write")]
        if len(results) == 1:
            return [_tool_call("runtime_exec", EXEC_ARGS, "call_exec")]
        return final_answer(str(results[-1]["content"]))

    def supports_function_calling(self) -> bool:
        return True

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 100_000


def test_crew_writes_and_runs_hello_py(sbx: Sandbox) -> None:
    tools = runtime_crewai_tools(sbx)
    assert all(isinstance(t, BaseTool) for t in tools)

    llm = ScriptedLLM(model="scripted", calls=[])
    coder = Agent(
        role="coder", goal="Run code in the sandbox", backstory="A careful programmer.", llm=llm, tools=tools,
        max_iter=5,
    )  # fmt: skip
    task = Task(
        description="Write hello.py that prints 6 * 7 and run it.", expected_output="What it printed", agent=coder
    )
    output = Crew(agents=[coder], tasks=[task]).kickoff()

    sent = llm.calls[0]["tools"]
    assert [(t["function"]["name"], t["function"]["parameters"]) for t in sent] == [
        (d.name, d.input_schema) for d in definitions()
    ]
    results = [m["content"] for m in llm.calls[-1]["messages"] if m.get("role") == "tool"]
    assert results == ["wrote 13 bytes to /workspace/hello.py", "exit_code: 0\nstdout:\n42\nstderr: (empty)"]
    assert len(llm.calls) == 3
    assert output.raw == "hello.py printed 42"


def test_error_result_is_a_tool_failure(sbx: Sandbox) -> None:
    read = runtime_crewai_tools(sbx)[1]
    failed = read.run(path="nope.py")
    assert isinstance(failed, ToolFailure) and failed.message.startswith("error: ")
    assert read.run(path="/etc/hostname") != ""
