"""The issue's two reference snippets, exactly as written, run as scripts
against the test server (configured through WITHRUNTIME_URL and
WITHRUNTIME_API_KEY, as a user would)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import Server

DISPATCH_SNIPPET = r"""import json
from withruntime import Sandbox
from withruntime.tools import sandbox_tools
with Sandbox.create(network={"internet": False}, timeout_seconds=1800) as sbx:
    tools = {tool.__name__: tool for tool in sandbox_tools(sbx)}
    print(sorted(tools))
    def dispatch(name: str, arguments: str) -> str:
        if name not in tools:
            return f"No tool named {name}"
        return json.dumps(tools[name](**json.loads(arguments)))
    print(dispatch("runtime_write_file", '{"path": "hello.py", "content": "print(6 * 7)\\n"}'))
    print(dispatch("runtime_exec", '{"command": "python3 hello.py"}'))
"""

# The second snippet is one line inside the same setting: the imports and a
# sandbox.
POSITIONAL_SNIPPET = r"""from withruntime import Sandbox
from withruntime.tools import sandbox_tools
with Sandbox.create(network={"internet": False}, timeout_seconds=1800) as sbx:
    run, read, write, ls = sandbox_tools(sbx); print(run("python3 -c 'print(6*7)'"))
"""


def _run_script(tmp_path: Path, name: str, source: str) -> list[str]:
    script = tmp_path / name
    script.write_text(source)
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, f"{name} failed:\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout.splitlines()


def test_dispatch_snippet(server: Server, tmp_path: Path) -> None:
    lines = _run_script(tmp_path, "dispatch_snippet.py", DISPATCH_SNIPPET)
    assert len(lines) == 3, lines
    assert lines[0] == "['runtime_exec', 'runtime_list_files', 'runtime_read_file', 'runtime_write_file']"

    write = json.loads(lines[1])
    assert write == {
        "text": "wrote 13 bytes to /workspace/hello.py",
        "isError": False,
        "data": {"path": "/workspace/hello.py", "bytes": 13},
    }

    ex = json.loads(lines[2])
    assert ex["isError"] is False
    assert ex["text"] == "exit_code: 0\nstdout:\n42\nstderr: (empty)"
    assert ex["data"]["exitCode"] == 0
    assert ex["data"]["stdout"] == "42\n"
    assert list(ex["data"]) == [
        "exitCode", "stdout", "stderr", "stdoutCutBytes", "stderrCutBytes",
        "timedOut", "oomKilled", "cwd", "durationMs",
    ]  # fmt: skip


def test_positional_snippet(server: Server, tmp_path: Path) -> None:
    lines = _run_script(tmp_path, "positional_snippet.py", POSITIONAL_SNIPPET)
    assert len(lines) == 1, lines
    res = ast.literal_eval(lines[0])
    assert res["isError"] is False
    assert res["data"]["exitCode"] == 0
    assert res["data"]["stdout"] == "42\n"
    assert res["text"] == "exit_code: 0\nstdout:\n42\nstderr: (empty)"


def test_snippets_leave_no_sandbox_running(server: Server) -> None:
    with server.client() as c:
        running = c.list(state="running")
    # Other tests' sandboxes carry metadata; the snippets' have none and are
    # destroyed when their with block ends.
    assert [s.id for s in running if not s.metadata] == []
