"""Invalid tool arguments come back as error results, never exceptions, and
never reach a sandbox. The tools here are bound to a sandbox on a server
that does not exist: any request would raise TransportError."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from withruntime import AsyncClient, AsyncSandbox, Client, Sandbox
from withruntime.tools import adispatch, dispatch, sandbox_tools

EXEC_EXAMPLE = 'Expected arguments: {"command": "python3 hello.py", "cwd": "", "timeoutSeconds": 0}'


@pytest.fixture
def tools() -> list[Any]:
    return sandbox_tools(Sandbox(Client("http://127.0.0.1:9", "k"), "sbx_unreachable"))


def _error(res: Any) -> str:
    assert isinstance(res, dict)
    assert res["isError"] is True, res
    assert "data" not in res
    json.dumps(res)  # JSON-serializable
    assert res["text"].startswith("error: ")
    return str(res["text"])


@pytest.mark.parametrize(
    "index,args,kwargs,want",
    [
        (0, (), {}, 'invalid arguments for runtime_exec: missing "command". ' + EXEC_EXAMPLE),
        (0, (), {"command": 5}, '"command" must be a string, not a number'),
        (0, (), {"command": None}, 'missing "command"'),
        (0, (), {"command": ["ls"]}, '"command" must be a string, not an array'),
        (0, ("ls",), {"bogus": 1, "alpha": 2}, 'unknown field "alpha", "bogus"'),
        (0, ("ls",), {"timeoutSeconds": 1.5}, '"timeoutSeconds" must be a whole number, not 1.5'),
        (0, ("ls",), {"timeoutSeconds": "5"}, '"timeoutSeconds" must be a whole number, not a string'),
        (0, ("ls",), {"timeoutSeconds": True}, '"timeoutSeconds" must be a whole number, not a boolean'),
        (
            0,
            ("ls",),
            {"timeoutSeconds": 5000},
            '"timeoutSeconds" is 5000; give 0 for the default of 120 seconds, or up to 1800',
        ),
        (0, ("ls",), {"timeoutSeconds": -1}, '"timeoutSeconds" is -1'),
        (0, ("",), {}, '"command" is empty; give a shell command line such as "ls -la"'),
        (0, ("   ",), {}, '"command" is empty'),
        (0, ("ls", "", 0, "extra"), {}, "runtime_exec takes at most 3 arguments"),
        (0, ("ls",), {"command": "ls"}, '"command" was given twice'),
        (0, ("x" * (256 * 1024 + 1),), {}, '"command" is 262145 bytes, over the limit of 262144'),
        (0, ("echo \x00",), {}, '"command" contains a NUL character, which is not allowed'),
        (0, ("echo \ud800",), {}, '"command" is not valid UTF-8'),
        (
            1,
            (),
            {},
            'invalid arguments for runtime_read_file: missing "path". Expected arguments: {"path": "hello.py"}',
        ),
        (1, ("",), {}, '"path" is empty; give the file to read, such as "hello.py"'),
        (1, ("a" * 4097,), {}, '"path" is 4097 bytes, over the limit of 4096'),
        (1, (), {"file": "a"}, 'unknown field "file"'),
        (2, ("hello.py",), {}, 'missing "content"'),
        (2, (), {"path": "x", "content": b"bytes"}, '"content" must be a string, not a bytes'),
        (2, ("/workspace", "x"), {}, "/workspace is a directory; give a file path such as /workspace/main.py"),
        (2, ("/", "x"), {}, "/ is a directory; give a file path such as /main.py"),
        (2, ("..", "x"), {}, "/ is a directory"),
        (3, (), {"path": 3}, '"path" must be a string, not a number'),
        (3, (), {"recursive": True}, 'unknown field "recursive"'),
    ],
)
def test_invalid_arguments_are_error_results(
    tools: list[Any], index: int, args: tuple[Any, ...], kwargs: dict[str, Any], want: str
) -> None:
    assert want in _error(tools[index](*args, **kwargs))


def test_model_arguments_as_one_dict(tools: list[Any]) -> None:
    assert 'unknown field "x"' in _error(tools[0]({"command": "ls", "x": 1}))


@pytest.mark.parametrize(
    "name,arguments,want",
    [
        (
            "runtime_nope",
            "{}",
            'there is no tool "runtime_nope"; the tools are runtime_exec, runtime_read_file, runtime_write_file, runtime_list_files',
        ),
        (
            "runtime_exec",
            "not json",
            "invalid arguments for runtime_exec: the arguments must be one JSON object (invalid JSON at byte 0",
        ),
        ("runtime_exec", '{"command": "ls"} {}', "the arguments must be one JSON object, with nothing after it"),
        ("runtime_exec", '["ls"]', "the arguments must be one JSON object (got an array)"),
        ("runtime_exec", "", 'missing "command"'),
        ("runtime_exec", "null", 'missing "command"'),
        ("runtime_exec", '"{\\"command\\": 7}"', '"command" must be a string, not a number'),  # JSON-encoded twice
        ("runtime_read_file", {"path": ""}, '"path" is empty'),
        ("runtime_read_file", b'{"path": 1}', '"path" must be a string, not a number'),
        ("runtime_list_files", 42, "the arguments must be one JSON object"),
    ],
)
def test_dispatch_invalid(tools: list[Any], name: str, arguments: Any, want: str) -> None:
    assert want in _error(dispatch(tools, name, arguments))
    assert want in _error(dispatch({t.__name__: t for t in tools}, name, arguments))


def test_async_invalid_arguments() -> None:
    async def main() -> None:
        atools = sandbox_tools(AsyncSandbox(AsyncClient("http://127.0.0.1:9", "k"), "sbx_unreachable"))
        assert 'missing "command"' in _error(await atools[0]())
        assert '"timeoutSeconds" must be a whole number' in _error(await atools[0]("ls", timeoutSeconds=0.5))
        assert 'missing "content"' in _error(await atools[2](path="a"))
        assert "there is no tool" in _error(await adispatch(atools, "nope", "{}"))
        assert '"path" must be a string' in _error(await adispatch(atools, "runtime_list_files", '{"path": []}'))

    asyncio.run(main())


def test_valid_arguments_do_reach_the_sandbox(tools: list[Any]) -> None:
    """The other side: valid arguments are sent, so this unreachable sandbox
    is a Runtime failure, raised (with the model's result attached), or
    returned with raise_errors=False."""
    from withruntime import TransportError

    with pytest.raises(TransportError) as ei:
        tools[0]("ls")
    res = ei.value.tool_result  # type: ignore[attr-defined]
    assert res["isError"] and res["text"].startswith("error: the sandbox could not be reached: ")
    quiet = sandbox_tools(Sandbox(Client("http://127.0.0.1:9", "k"), "sbx_unreachable"), raise_errors=False)
    assert "could not be reached" in _error(quiet[3]())
