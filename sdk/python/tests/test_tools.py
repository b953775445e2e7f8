"""The tools against real sandboxes: results shaped like the Go tools', and
— when Go and the repository are here — the very same results as the Go
tools for the same calls."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from withruntime import Sandbox, WithRuntimeError
from withruntime.tools import dispatch, sandbox_tools

from .conftest import REPO, Server

EXEC_KEYS = [
    "exitCode",
    "stdout",
    "stderr",
    "stdoutCutBytes",
    "stderrCutBytes",
    "timedOut",
    "oomKilled",
    "cwd",
    "durationMs",
]
READ_KEYS = ["path", "size", "encoding", "content", "cutBytes"]
WRITE_KEYS = ["path", "bytes"]
LIST_KEYS = ["path", "entries", "total", "truncated"]
FILE_INFO_KEYS = ["name", "path", "type", "size", "mode", "modTime", "uid", "gid"]


def test_results(sbx: Sandbox) -> None:
    run, read, write, ls = sandbox_tools(sbx)

    w = write("src/main.py", "print('hi')\n")
    assert w == {
        "text": "wrote 12 bytes to /workspace/src/main.py",
        "isError": False,
        "data": {"path": "/workspace/src/main.py", "bytes": 12},
    }
    assert list(w["data"]) == WRITE_KEYS

    r = run("python3 main.py; echo bad >&2; exit 3", cwd="src")
    assert r["isError"] is False and list(r["data"]) == EXEC_KEYS
    assert r["text"] == "exit_code: 3\nstdout:\nhi\nstderr:\nbad"
    assert (r["data"]["exitCode"], r["data"]["cwd"]) == (3, "/workspace/src")

    t = run("sleep 3", timeoutSeconds=1)
    assert t["data"]["timedOut"] and t["data"]["exitCode"] == 124 and t["data"]["signal"] == "SIGKILL"
    assert "note: the command was killed by its timeout after 1 seconds" in t["text"]

    big = run("python3 -c \"print('é' * 20000)\"")
    cut = big["data"]["stdoutCutBytes"]
    assert cut > 0 and "bytes cut from the middle of stdout (40001 bytes in all)" in big["text"]
    assert len(big["data"]["stdout"].encode()) < 16384 + 200

    rd = read("src/main.py")
    assert rd["text"] == "/workspace/src/main.py (12 bytes, encoding: utf-8)\nprint('hi')\n"
    assert list(rd["data"]) == READ_KEYS and rd["data"]["encoding"] == "utf-8"

    run("head -c 20000 /dev/urandom > rand.bin; seq 1 20000 > lines.txt; ln -s src link")
    b = read("rand.bin")
    assert b["data"]["encoding"] == "base64" and b["data"]["cutBytes"] == 20000 - 12288
    assert "encoding: base64" in b["text"] and "xxd -s 12288" in b["text"]
    lines = read("lines.txt")
    assert lines["data"]["cutBytes"] > 0 and "bytes cut from the middle of the file" in lines["text"]
    assert lines["data"]["content"].startswith("1\n2\n") and lines["data"]["content"].endswith("19999\n20000\n")

    listing = ls("")
    assert list(listing["data"]) == LIST_KEYS and listing["data"]["truncated"] is False
    assert listing["text"].splitlines()[0] == "/workspace: 4 entries"
    assert "symlink          3  link -> src" in listing["text"] and "dir              -  src/" in listing["text"]
    for e in listing["data"]["entries"]:
        assert list(e)[:8] == FILE_INFO_KEYS
    assert ls()["text"] == listing["text"]

    # Errors the model can fix are results.
    assert read("nope.txt")["isError"] and "runtime_list_files" in read("nope.txt")["text"]
    assert read("src")["text"] == "error: /workspace/src is a directory; list it with runtime_list_files"
    assert ls("nope")["isError"]
    assert run("ls", cwd="nope")["text"].startswith("error: cwd /workspace/nope does not exist")

    for res in (w, r, t, big, rd, b, lines, listing):
        json.dumps(res)


def test_dispatch(sbx: Sandbox) -> None:
    tools = sandbox_tools(sbx)
    assert dispatch(tools, "runtime_write_file", '{"path": "a.py", "content": "print(1)"}')["data"]["bytes"] == 8
    assert dispatch(tools, "runtime_exec", {"command": "python3 a.py"})["data"]["stdout"] == "1\n"
    assert dispatch(tools, "runtime_exec", '"{\\"command\\": \\"echo twice\\"}"')["data"]["stdout"] == "twice\n"
    assert dispatch({t.__name__: t for t in tools}, "runtime_list_files", "")["text"].startswith("/workspace: 1 entry")


# -- parity with the Go tools ----------------------------------------------

# The same calls, in order, through the Go tools and the Python tools, each
# on a fresh sandbox. Results must be equal (key order included), except
# durations and modification times; calls marked loose have parser messages
# that differ by language and are compared up to the parser's own words.
PARITY_CALLS: list[tuple[str, str, bool]] = [
    ("runtime_write_file", '{"path": "hello.py", "content": "print(6 * 7)\\n"}', False),
    ("runtime_exec", '{"command": "python3 hello.py"}', False),
    ("runtime_exec", '{"command": "python3 hello.py", "cwd": "", "timeoutSeconds": 0}', False),
    ("runtime_exec", '{"command": "echo out; echo err >&2; exit 3"}', False),
    ("runtime_exec", '{"command": "ls", "cwd": "missing"}', False),
    ("runtime_exec", '{"command": "ls", "bogus": 1}', False),
    ("runtime_exec", '{"command": 5}', False),
    ("runtime_exec", '{"command": ""}', False),
    ("runtime_exec", '{"command": "ls", "timeoutSeconds": 1.5}', False),
    ("runtime_exec", '{"command": "ls", "timeoutSeconds": "5"}', False),
    ("runtime_exec", '{"command": "ls", "timeoutSeconds": 99999}', False),
    ("runtime_exec", '{"command": "sleep 3", "timeoutSeconds": 1}', False),
    ("runtime_exec", '{"command": "python3 -c \\"print(\'x\' * 40000)\\""}', False),
    ("runtime_exec", '{"command": "python3 -c \\"print(\'\\u00e9\' * 20000)\\" >&2"}', False),
    ("runtime_exec", '{"command": "printf \'a\\\\xff\\\\xfeb\'"}', False),
    ("runtime_exec", '{"command": "kill -9 $$"}', False),
    (
        "runtime_exec",
        '{"command": "seq 1 30000 > big.txt; mkdir -p d/e; ln -s hello.py link.py; head -c 20000 /dev/zero > zeros.bin"}',
        False,
    ),
    ("runtime_read_file", '{"path": "hello.py"}', False),
    ("runtime_read_file", '{"path": "big.txt"}', False),
    ("runtime_read_file", '{"path": "zeros.bin"}', False),
    ("runtime_read_file", '{"path": "missing.txt"}', False),
    ("runtime_read_file", '{"path": "d"}', False),
    ("runtime_read_file", '{"path": ""}', False),
    ("runtime_read_file", '"{\\"path\\": \\"hello.py\\"}"', False),
    ("runtime_write_file", '{"path": "/workspace", "content": "x"}', False),
    ("runtime_write_file", '{"path": "d/e/f/new.txt", "content": "caf\\u00e9\\n"}', False),
    ("runtime_write_file", '{"path": "hello.py"}', False),
    ("runtime_list_files", '{"path": ""}', False),
    ("runtime_list_files", "{}", False),
    ("runtime_list_files", '{"path": "d/e"}', False),
    ("runtime_list_files", '{"path": "/nonexistent"}', False),
    ("runtime_nope", "{}", False),
    ("runtime_exec", "not json", True),
    ("runtime_exec", '["ls"]', True),
]

GO_PROGRAM = """
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	withruntime "withruntime.dev/runtime/sdk/go"
	"withruntime.dev/runtime/sdk/go/tools"
)

type call struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type output struct {
	Result tools.Result `json:"result"`
	Failed bool         `json:"failed"`
}

func main() {
	var req struct {
		Sandbox string `json:"sandbox"`
		Calls   []call `json:"calls"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx := context.Background()
	sbx, err := withruntime.Connect(ctx, req.Sandbox)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ts := tools.ForSandbox(sbx)
	outs := []output{}
	for _, c := range req.Calls {
		res, err := tools.Dispatch(ctx, ts, c.Name, json.RawMessage(c.Arguments))
		outs = append(outs, output{Result: res, Failed: err != nil})
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(outs)
}
"""


def _normalize(res: dict[str, Any]) -> dict[str, Any]:
    res = json.loads(json.dumps(res))
    data = res.get("data")
    if isinstance(data, dict):
        data.pop("durationMs", None)
        for e in data.get("entries") or []:
            e.pop("modTime", None)
    return res


def _go_results(server: Server, tmp_path: Path, sandbox_id: str) -> list[dict[str, Any]]:
    go = shutil.which("go")
    sdk = REPO / "sdk" / "go"
    if go is None or not (sdk / "go.mod").exists():
        pytest.skip("needs Go and the repository's sdk/go")
    mod = tmp_path / "goparity"
    mod.mkdir()
    (mod / "go.mod").write_text(
        textwrap.dedent(
            f"""\
            module goparity

            go 1.23

            require withruntime.dev/runtime/sdk/go v0.0.0

            replace withruntime.dev/runtime/sdk/go => {sdk}
            """
        )
    )
    (mod / "main.go").write_text(GO_PROGRAM)
    env = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off", GOTOOLCHAIN="local", GOWORK="off")
    build = subprocess.run(
        [go, "build", "-o", str(mod / "goparity"), "."], cwd=mod, env=env, capture_output=True, text=True, timeout=300
    )
    assert build.returncode == 0, build.stderr
    req = {"sandbox": sandbox_id, "calls": [{"name": n, "arguments": a} for n, a, _ in PARITY_CALLS]}
    proc = subprocess.run(
        [str(mod / "goparity")], input=json.dumps(req), env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout))


def test_same_results_as_the_go_tools(server: Server, tmp_path: Path) -> None:
    with Sandbox.create(metadata={"test": "parity-go"}) as go_sbx:
        go_out = _go_results(server, tmp_path, go_sbx.id)
    with Sandbox.create(metadata={"test": "parity-py"}) as py_sbx:
        tools = sandbox_tools(py_sbx)
        py_out = []
        for name, args, _ in PARITY_CALLS:
            try:
                py_out.append({"result": dispatch(tools, name, args), "failed": False})
            except WithRuntimeError as e:
                py_out.append({"result": e.tool_result, "failed": True})  # type: ignore[attr-defined]
    assert len(go_out) == len(py_out) == len(PARITY_CALLS)
    for (name, args, loose), g, p in zip(PARITY_CALLS, go_out, py_out):
        assert g["failed"] == p["failed"], (name, args, g, p)
        gr, pr = _normalize(g["result"]), _normalize(p["result"])
        if loose:
            assert gr["isError"] and pr["isError"]
            assert gr["text"].split("(")[0] == pr["text"].split("(")[0], (name, args)
            continue
        assert json.dumps(pr) == json.dumps(gr), f"{name} {args}:\n go: {json.dumps(gr)}\n py: {json.dumps(pr)}"
