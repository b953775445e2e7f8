"""The tools' contract: names, descriptions and schemas identical to the Go
SDK's (its golden files), and functions whose signatures, type hints and
docstrings say the same. Needs no server."""

from __future__ import annotations

import inspect
import json
import typing
from importlib import resources

import pytest

import withruntime.tools as wt
from withruntime import Client, Sandbox
from withruntime.tools import TOOL_NAMES, ToolResult, definitions, sandbox_tools

from .conftest import go_testdata


def _shipped(name: str) -> bytes:
    return resources.files("withruntime.tools").joinpath("definitions", f"{name}.json").read_bytes()


def _go_dump(v: object) -> bytes:
    """JSON as the Go golden test writes it (Encoder, two-space indent, no
    HTML escaping, a final newline)."""
    return (json.dumps(v, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_shipped_definitions_are_the_go_goldens(name: str) -> None:
    golden = go_testdata(f"{name}.golden").read_bytes()
    shipped = _shipped(name)
    assert shipped == golden, f"{name}.json differs from sdk/go/tools/testdata/{name}.golden; copy it over"
    assert json.loads(shipped) == json.loads(golden)


@pytest.mark.parametrize("index,name", list(enumerate(TOOL_NAMES)))
def test_definitions_serialize_as_the_go_goldens(index: int, name: str) -> None:
    d = definitions()[index]
    assert d.name == name
    golden = go_testdata(f"{name}.golden").read_bytes()
    assert d.to_json().encode("utf-8") == golden
    assert d.to_dict() == json.loads(golden)
    assert list(d.to_dict()) == ["name", "description", "inputSchema"]


@pytest.mark.parametrize(
    "golden,build",
    [
        ("openai_chat", wt.openai_chat),
        ("openai_responses", wt.openai_responses),
        ("anthropic", wt.anthropic),
        ("gemini", wt.gemini),
    ],
)
def test_provider_declarations_match_go(golden: str, build: typing.Callable[..., object]) -> None:
    want = go_testdata(f"{golden}.golden").read_bytes()
    assert _go_dump(build()) == want
    # The same from bound tools.
    fake = Sandbox(Client("http://127.0.0.1:9", "k"), "sbx_unused")
    assert _go_dump(build(sandbox_tools(fake))) == want


def test_definitions_are_copies() -> None:
    a = definitions()
    a[0].input_schema["properties"].clear()
    assert definitions()[0].input_schema["properties"]


def test_tool_functions_match_their_definitions() -> None:
    fake = Sandbox(Client("http://127.0.0.1:9", "k"), "sbx_unused")
    tools = sandbox_tools(fake)
    assert [t.__name__ for t in tools] == list(TOOL_NAMES)
    for tool, d in zip(tools, definitions()):
        assert tool.definition == d  # type: ignore[attr-defined]
        sig = inspect.signature(tool)
        schema = d.input_schema
        assert list(sig.parameters) == list(schema["properties"])
        hints = typing.get_type_hints(tool)
        assert hints["return"] is ToolResult
        for pname, param in sig.parameters.items():
            want = {"string": str, "integer": int}[schema["properties"][pname]["type"]]
            assert param.annotation is want and hints[pname] is want
            assert schema["properties"][pname]["description"] in (tool.__doc__ or "")
        assert (tool.__doc__ or "").startswith(d.description + "\n")
        assert set(schema["required"]) == set(schema["properties"])
    exec_sig = inspect.signature(tools[0])
    assert exec_sig.parameters["command"].default is inspect.Parameter.empty
    assert exec_sig.parameters["cwd"].default == ""
    assert exec_sig.parameters["timeoutSeconds"].default == 0
    assert inspect.signature(tools[3]).parameters["path"].default == ""


def test_async_tool_functions() -> None:
    from withruntime import AsyncClient, AsyncSandbox

    fake = AsyncSandbox(AsyncClient("http://127.0.0.1:9", "k"), "sbx_unused")
    tools = sandbox_tools(fake)
    assert [t.__name__ for t in tools] == list(TOOL_NAMES)
    assert all(inspect.iscoroutinefunction(t) for t in tools)
    assert list(inspect.signature(tools[0]).parameters) == ["command", "cwd", "timeoutSeconds"]
