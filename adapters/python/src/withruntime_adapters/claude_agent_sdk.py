"""Runtime's sandbox tools for the Claude Agent SDK: an in-process MCP server
(``create_sdk_mcp_server``) whose four tools have the SDK's names,
descriptions and JSON Schemas and whose handlers run the SDK's functions.

::

    from claude_agent_sdk import ClaudeSDKClient
    from withruntime import AsyncSandbox
    from withruntime_adapters.claude_agent_sdk import runtime_agent_options

    async with await AsyncSandbox.create(timeout_seconds=1800) as sbx:
        options = runtime_agent_options(sbx)  # the server, allowed_tools, built-in tools off
        async with ClaudeSDKClient(options=options) as client:
            await client.query("Write hello.py and run it")
            async for message in client.receive_response():
                print(message)

or, to build the options yourself::

    server = runtime_mcp_server(sbx)                     # McpSdkServerConfig named "runtime"
    options = ClaudeAgentOptions(
        mcp_servers={"runtime": server},
        allowed_tools=runtime_allowed_tools("runtime"),  # mcp__runtime__runtime_exec, ...
        tools=[],                                        # no built-in Bash, Read, Write, Edit, ...
    )

Claude sees each result's ``text`` as the tool result, flagged ``is_error``
for a result the SDK marks ``isError`` (invalid arguments, no such file). The
server also checks the arguments against the JSON Schema first. A Runtime
failure (sandbox gone, server unreachable) is reported to Claude as an error
result by the Agent SDK's MCP server (it turns every handler exception into
one).

Switching off Claude Code's own local shell and file tools: pass
``tools=[]`` in ``ClaudeAgentOptions`` (no built-in tools at all: ``Bash``,
``Read``, ``Write``, ``Edit``, ``NotebookEdit``, ``Monitor``, ``WebFetch``,
...); or, to keep some built-ins, put the local ones in ``disallowed_tools``
(:data:`LOCAL_TOOLS` lists them). :func:`runtime_agent_options` does the
former. Setting ``allowed_tools`` alone does not remove a tool: it only
skips the permission prompt for the tools it names.
"""

from __future__ import annotations

from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, McpSdkServerConfig, SdkMcpTool, create_sdk_mcp_server

from ._common import RuntimeTool, Source, runtime_tools, text_of

__all__ = [
    "runtime_mcp_server",
    "runtime_mcp_tools",
    "runtime_allowed_tools",
    "runtime_agent_options",
    "mcp_tool",
    "LOCAL_TOOLS",
]

#: Claude Code's built-in tools that run commands or touch files on this
#: machine, for ``disallowed_tools`` when ``tools=[]`` is not wanted: those of
#: the CLI bundled with claude-agent-sdk 0.2.189 (Claude Code 2.1.332), and
#: the names older CLIs used (a name the CLI lacks is ignored).
LOCAL_TOOLS = [
    "Bash",
    "Monitor",
    "Read",
    "Write",
    "Edit",
    "NotebookEdit",
    "EnterWorktree",
    "ExitWorktree",
    "BashOutput",
    "KillShell",
    "MultiEdit",
    "Glob",
    "Grep",
]


def mcp_tool(tool: RuntimeTool) -> SdkMcpTool[Any]:
    """One SDK tool as a tool of an in-process MCP server."""

    async def handler(arguments: dict[str, Any]) -> dict[str, Any]:
        result = await tool.acall(arguments)
        return {"content": [{"type": "text", "text": text_of(result)}], "is_error": bool(result.get("isError"))}

    return SdkMcpTool(name=tool.name, description=tool.description, input_schema=tool.schema(), handler=handler)


def runtime_mcp_tools(source: Source, *, raise_errors: bool = True) -> list[SdkMcpTool[Any]]:
    """The four tools as ``SdkMcpTool`` objects (for ``create_sdk_mcp_server``)."""
    return [mcp_tool(t) for t in runtime_tools(source, raise_errors=raise_errors)]


def runtime_mcp_server(source: Source, *, name: str = "runtime", raise_errors: bool = True) -> McpSdkServerConfig:
    """An in-process MCP server of the four tools (runtime_exec,
    runtime_read_file, runtime_write_file, runtime_list_files) bound to a
    ``Sandbox`` or ``AsyncSandbox`` (or the functions
    ``withruntime.tools.sandbox_tools`` returned), for
    ``ClaudeAgentOptions(mcp_servers={name: ...})``."""
    return create_sdk_mcp_server(name, tools=runtime_mcp_tools(source, raise_errors=raise_errors))


def runtime_allowed_tools(server_name: str = "runtime") -> list[str]:
    """The tools' names as Claude Code calls them, ``mcp__<server>__<tool>``."""
    from withruntime.tools import TOOL_NAMES

    return [f"mcp__{server_name}__{n}" for n in TOOL_NAMES]


def runtime_agent_options(source: Source, *, name: str = "runtime", **options: Any) -> ClaudeAgentOptions:
    """``ClaudeAgentOptions`` with the server, its tools allowed and Claude
    Code's built-in tools switched off (``tools=[]``); other options are
    passed through (``allowed_tools`` and ``mcp_servers`` are added to)."""
    servers = dict(options.pop("mcp_servers", None) or {})
    servers[name] = runtime_mcp_server(source, name=name)
    allowed = list(options.pop("allowed_tools", None) or []) + runtime_allowed_tools(name)
    options.setdefault("tools", [])
    return ClaudeAgentOptions(mcp_servers=servers, allowed_tools=allowed, **options)
