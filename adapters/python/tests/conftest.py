"""The SDK's test fixtures, reused: one real Runtime server for the session
(``withruntime serve`` on a free port with a temporary data directory, real
gVisor sandboxes; sdk/python/tests/conftest.py), and a fresh sandbox per
test. Needs root and ``withruntime`` on PATH (scripts/install.sh)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from withruntime import AsyncSandbox, Sandbox

_SDK_CONFTEST = Path(__file__).resolve().parents[3] / "sdk" / "python" / "tests" / "conftest.py"
_spec = importlib.util.spec_from_file_location("withruntime_sdk_test_fixtures", _SDK_CONFTEST)
assert _spec is not None and _spec.loader is not None, _SDK_CONFTEST
_fixtures = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _fixtures
_spec.loader.exec_module(_fixtures)

server = _fixtures.server  # the session's real Runtime server

#: What the scripted models ask for, as the issue says: write hello.py, then run it.
HELLO_PATH = "hello.py"
HELLO_CONTENT = "print(6 * 7)\n"
HELLO_COMMAND = "python3 hello.py"
WRITE_ARGS = {"path": HELLO_PATH, "content": HELLO_CONTENT}
EXEC_ARGS = {"command": HELLO_COMMAND, "cwd": "", "timeoutSeconds": 0}


@pytest.fixture
def sbx(server: object) -> Iterator[Sandbox]:
    with Sandbox.create(timeout_seconds=300, metadata={"test": "python-adapters"}) as s:
        yield s


@pytest.fixture
async def async_sbx(server: object) -> AsyncIterator[AsyncSandbox]:
    s = await AsyncSandbox.create(timeout_seconds=300, metadata={"test": "python-adapters"})
    async with s:
        yield s


def final_answer(tool_output: str) -> str:
    """What every scripted model answers last, from the tool result the
    agent loop handed back to it: the exec result's stdout."""
    assert "exit_code: 0" in tool_output, tool_output
    stdout = tool_output.split("stdout:\n", 1)[1].split("\nstderr:", 1)[0]
    return f"hello.py printed {stdout.strip()}"
