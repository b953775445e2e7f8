"""Claude Agent SDK: the tools as an in-process MCP server
(``create_sdk_mcp_server``), used by Claude Code's real agent loop — the CLI
the SDK bundles, started by ``ClaudeSDKClient`` — with a scripted model
behind a fake Messages API on 127.0.0.1 (``ANTHROPIC_BASE_URL``), against a
real sandbox. The MCP server is also called directly, as an MCP client
would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("claude_agent_sdk")

from claude_agent_sdk import AssistantMessage, ClaudeSDKClient, ResultMessage, TextBlock  # noqa: E402

from withruntime import AsyncSandbox  # noqa: E402
from withruntime.tools import definitions  # noqa: E402
from withruntime_adapters.claude_agent_sdk import (  # noqa: E402
    runtime_agent_options,
    runtime_allowed_tools,
    runtime_mcp_server,
)

from .conftest import EXEC_ARGS, WRITE_ARGS, final_answer  # noqa: E402
from .fake_anthropic import fake_messages_api  # noqa: E402


def _tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for m in body.get("messages", [])
        if m["role"] == "user" and isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    ]


def _text(result: dict[str, Any]) -> str:
    """A tool result's text, without the reminders Claude Code appends."""
    content = result.get("content")
    text = content if isinstance(content, str) else "".join(c.get("text", "") for c in content or [])
    return text.split("\n<system-reminder>", 1)[0]


def scripted_model(body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """Write hello.py, run it, then answer with what the tool result said."""
    results = _tool_results(body)
    if not results:
        return [
            {"type": "tool_use", "id": "toolu_write", "name": "mcp__runtime__runtime_write_file", "input": WRITE_ARGS}
        ], "tool_use"
    if len(results) == 1:
        return [
            {"type": "tool_use", "id": "toolu_exec", "name": "mcp__runtime__runtime_exec", "input": EXEC_ARGS}
        ], "tool_use"
    return [{"type": "text", "text": final_answer(_text(results[-1]))}], "end_turn"


async def test_claude_code_loop_writes_and_runs_hello_py(async_sbx: AsyncSandbox, tmp_path: Path) -> None:
    with fake_messages_api(scripted_model) as (base_url, requests):
        options = runtime_agent_options(
            async_sbx,
            model="claude-sonnet-4-5",
            max_turns=5,
            cwd=str(tmp_path),
            env={
                "ANTHROPIC_BASE_URL": base_url,
                "ANTHROPIC_API_KEY": "sk-ant-scripted",
                "HOME": str(tmp_path),
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
            },
        )
        messages = []
        async with ClaudeSDKClient(options=options) as client:
            await client.query("Write hello.py that prints 6 * 7 and run it.")
            async for message in client.receive_response():
                messages.append(message)

    # The model was offered the four tools (and no built-in ones), with the SDK's schemas.
    offered = {t["name"]: t for t in requests[0]["tools"]}
    assert sorted(offered) == sorted(runtime_allowed_tools())
    for d in definitions():
        assert offered[f"mcp__runtime__{d.name}"]["input_schema"] == d.input_schema
    # Claude Code handed each tool result back to the model.
    results = _tool_results(requests[-1])
    assert [(_text(r), bool(r.get("is_error"))) for r in results] == [
        ("wrote 13 bytes to /workspace/hello.py", False),
        ("exit_code: 0\nstdout:\n42\nstderr: (empty)", False),
    ]
    texts = [b.text for m in messages if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, TextBlock)]
    assert texts[-1] == "hello.py printed 42"
    result = messages[-1]
    assert isinstance(result, ResultMessage) and not result.is_error and result.result == "hello.py printed 42"
    assert (await async_sbx.files.read_text("hello.py")) == "print(6 * 7)\n"


async def test_mcp_server_lists_and_calls_the_tools(async_sbx: AsyncSandbox) -> None:
    """The server object as an MCP client sees it (the SDK's in-memory
    transport), without the CLI."""
    from mcp import Client

    server = runtime_mcp_server(async_sbx)
    assert server["type"] == "sdk" and server["name"] == "runtime"
    async with Client(server["instance"]) as session:
        listed = (await session.list_tools()).tools
        assert [(t.name, t.description, t.input_schema) for t in listed] == [
            (d.name, d.description, d.input_schema) for d in definitions()
        ]
        wrote = await session.call_tool("runtime_write_file", WRITE_ARGS)
        ran = await session.call_tool("runtime_exec", EXEC_ARGS)
        missing = await session.call_tool("runtime_read_file", {"path": "nope.py"})
    assert (wrote.content[0].text, wrote.is_error) == ("wrote 13 bytes to /workspace/hello.py", False)
    assert (ran.content[0].text, ran.is_error) == ("exit_code: 0\nstdout:\n42\nstderr: (empty)", False)
    assert missing.is_error and missing.content[0].text.startswith("error: ")
