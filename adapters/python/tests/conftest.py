"""The SDK's test fixtures, reused: one real Runtime server for the session
(``withruntime serve`` on a free port with a temporary data directory, real
gVisor sandboxes; sdk/python/tests/conftest.py), and a fresh sandbox per
test. Needs root and ``withruntime`` on PATH (scripts/install.sh)."""

from __future__ import annotations

import importlib.util
import struct
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
#: The code-interpreter template ("code-interpreter"), built in the server's
#: templates directory (WITHRUNTIME_TEMPLATES_DIR) only if it is missing.
code_template = _fixtures.code_template

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


@pytest.fixture
def code_sbx(code_template: str) -> Iterator[Sandbox]:
    with Sandbox.create(template=code_template, timeout_seconds=300, metadata={"test": "python-adapters"}) as s:
        yield s


@pytest.fixture
async def async_code_sbx(code_template: str) -> AsyncIterator[AsyncSandbox]:
    s = await AsyncSandbox.create(template=code_template, timeout_seconds=300, metadata={"test": "python-adapters"})
    async with s:
        yield s


#: What the scripted models ask runtime_run_code for: set a variable, then
#: use it (the kernel kept it) and draw a matplotlib chart.
CODE_SET_ARGS = {"code": "xs = [3, 1, 4, 1, 5]\nprint(sum(xs))", "language": ""}
CODE_CHART_ARGS = {
    "code": "import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3))\nplt.plot(xs)\nplt.show()\nprint(max(xs))",
    "language": "python",
}


def png_size(data: bytes) -> tuple[int, int]:
    """The width and height of a PNG (fails the test if data is not one)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", data[:16]
    return struct.unpack(">II", data[16:24])


def code_answer(set_output: str, chart_output: str) -> str:
    """What every scripted model answers after the two runtime_run_code
    calls, from the tool results the loop handed back: the sum, the max, and
    the chart's line of the summary."""
    assert "error:" not in set_output + chart_output, (set_output, chart_output)
    total = set_output.split("stdout:\n", 1)[1].split("\n", 1)[0]
    top = chart_output.split("stdout:\n", 1)[1].split("\n", 1)[0]
    chart = [line for line in chart_output.splitlines() if "(image/png" in line]
    return f"sum {total}, max {top}; {chart[0] if chart else 'no chart'}"


def final_answer(tool_output: str) -> str:
    """What every scripted model answers last, from the tool result the
    agent loop handed back to it: the exec result's stdout."""
    assert "exit_code: 0" in tool_output, tool_output
    stdout = tool_output.split("stdout:\n", 1)[1].split("\nstderr:", 1)[0]
    return f"hello.py printed {stdout.strip()}"
