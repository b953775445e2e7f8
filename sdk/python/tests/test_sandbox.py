"""The sync SDK against a real server and real sandboxes."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

import withruntime
from withruntime import (
    APIError,
    BadRequestError,
    Client,
    ConflictError,
    LeaseEndedError,
    NotConfiguredError,
    NotFoundError,
    Sandbox,
    SandboxGoneError,
    SandboxPausedError,
    SandboxStoppedError,
    TransportError,
    UnauthorizedError,
    WithRuntimeError,
)
from withruntime._http import create_body
from withruntime.tools import sandbox_tools

from .conftest import Server

MiB = 1 << 20


# -- create, connect, list, kill ------------------------------------------


def test_create_exec_and_destroy_on_exit(server: Server) -> None:
    with Sandbox.create(network={"internet": False}, timeout_seconds=120, metadata={"test": "lifecycle"}) as sbx:
        assert sbx.id.startswith("sbx_")
        assert sbx.info is not None and sbx.info.state == "running"
        assert sbx.info.metadata == {"test": "lifecycle"}
        assert sbx.info.lease_ends_at is not None and sbx.info.created_at is not None
        assert 115 <= (sbx.info.lease_ends_at - sbx.info.created_at).total_seconds() <= 125
        res = sbx.exec("python3 -c 'print(6*7)'")
        assert (res.exit_code, res.stdout, res.stderr, res.ok) == (0, "42\n", "", True)
        sid = sbx.id
    with server.client() as c:
        info = c.list(metadata={"test": "lifecycle"})[0]
    assert (info.id, info.state, info.end_reason) == (sid, "stopped", "deleted")
    with pytest.raises(SandboxStoppedError):
        sbx.exec("true")  # the handle is closed
    sbx.kill()  # idempotent


def test_create_options(server: Server) -> None:
    with Sandbox.create(
        template="base", cpu=0.5, memory_mib=256, disk_mib=512, env={"GREETING": "hi"}, metadata={"test": "opts"}
    ) as sbx:
        assert sbx.info is not None
        assert (sbx.info.cpu, sbx.info.memory_mib, sbx.info.disk_mib) == (0.5, 256, 512)
        assert sbx.exec("echo $GREETING").stdout == "hi\n"


def test_network_is_sent_only_when_not_the_default() -> None:
    kw = dict(template=None, timeout_seconds=1800, cpu=None, memory_mib=None, disk_mib=None, env=None, metadata=None)
    assert create_body(network={"internet": False}, **kw) == {"timeoutSeconds": 1800}  # type: ignore[arg-type]
    assert create_body(network=None, **kw) == {"timeoutSeconds": 1800}  # type: ignore[arg-type]
    assert create_body(network={"internet": True}, **kw) == {"timeoutSeconds": 1800, "network": {"internet": True}}  # type: ignore[arg-type]


def test_invalid_options_are_bad_request(server: Server) -> None:
    with pytest.raises(BadRequestError) as ei:
        Sandbox.create(memory_mib=1)
    e = ei.value
    assert (e.status, e.code) == (400, "bad_request")
    assert str(e).startswith("withruntime: bad_request (400): ")
    assert isinstance(e, APIError) and isinstance(e, WithRuntimeError)
    with pytest.raises(BadRequestError):
        Sandbox.create(template="no-such-template")


def test_connect_to_an_existing_sandbox(server: Server, sbx: Sandbox) -> None:
    sbx.files.write_file("shared.txt", "from the first handle")
    with Client(server.url, server.key) as other:
        again = Sandbox.connect(sbx.id, client=other)
        assert again.id == sbx.id and again.info is not None and again.info.state == "running"
        assert again.files.read_text("shared.txt") == "from the first handle"
        assert again.exec("cat shared.txt").stdout == "from the first handle"
    # With the configuration from the environment, and as a context manager.
    third = Sandbox.connect(sbx.id)
    assert third.exec("echo ok").stdout == "ok\n"

    with pytest.raises(NotFoundError) as ei:
        Sandbox.connect("sbx_doesnotexist0000")
    assert ei.value.status == 404 and ei.value.code == "not_found"


def test_connect_to_a_destroyed_sandbox(server: Server) -> None:
    sbx = Sandbox.create(metadata={"test": "destroyed"})
    sbx.kill()
    sbx.kill()  # idempotent
    with pytest.raises(SandboxStoppedError) as ei:
        Sandbox.connect(sbx.id)
    assert ei.value.status == 410 and ei.value.code == "sandbox_stopped"
    with pytest.raises(SandboxStoppedError):
        sbx.exec("true")  # the server says so: kill() does not close the handle


def test_list(server: Server) -> None:
    with Sandbox.create(metadata={"test": "list", "k": "a"}) as a, Sandbox.create(metadata={"test": "list", "k": "b"}):
        got = Sandbox.list(metadata={"test": "list"})
        assert len(got) == 2
        assert [s.id for s in Sandbox.list(metadata={"test": "list", "k": "a"})] == [a.id]
        assert a.id in [s.id for s in Sandbox.list(state="running")]
        assert all(s.state == "stopped" for s in Sandbox.list(state="stopped"))
        assert got[0].to_dict()["metadata"]["test"] == "list"


def test_set_timeout_and_lease_end(server: Server) -> None:
    extended = Sandbox.create(timeout_seconds=60, metadata={"test": "lease"})
    ending = Sandbox.create(timeout_seconds=2, metadata={"test": "lease"})
    shortened = extended.set_timeout(2)  # leases move both ways
    assert shortened.lease_ends_at is not None and extended.info == shortened
    info = extended.set_timeout(120)
    assert info.lease_ends_at is not None and info.lease_ends_at > shortened.lease_ends_at
    time.sleep(2)
    deadline = time.monotonic() + 20
    while ending.refresh().state != "stopped":  # the server ends it at once; allow for a busy host
        assert time.monotonic() < deadline, "the lease did not end"
        time.sleep(0.2)

    assert extended.exec("echo alive").stdout == "alive\n"
    extended.close()

    with pytest.raises(LeaseEndedError) as ei:
        ending.exec("echo too late")
    e = ei.value
    assert (e.status, e.code) == (410, "lease_ended")
    assert isinstance(e, SandboxGoneError)
    assert "lease ended" in e.message and "create a new sandbox" in e.message
    assert str(e).startswith("withruntime: lease_ended (410): ")

    with pytest.raises(LeaseEndedError):
        ending.files.read_file("note.txt")
    with pytest.raises(LeaseEndedError):
        for _ in ending.exec_stream("echo x"):
            pass
    with pytest.raises(LeaseEndedError):
        Sandbox.connect(ending.id)
    with pytest.raises(LeaseEndedError):
        ending.set_timeout(60)

    # The tools raise it for the program, with a result for the model...
    run, read, _, _ = sandbox_tools(ending)
    with pytest.raises(LeaseEndedError) as ti:
        run("echo x")
    assert ti.value.tool_result["isError"] is True  # type: ignore[attr-defined]
    assert "the sandbox is no longer running" in ti.value.tool_result["text"]  # type: ignore[attr-defined]
    # ... or return that result when asked to.
    quiet_read = sandbox_tools(ending, raise_errors=False)[1]
    res = quiet_read("note.txt")
    assert res["isError"] and "no longer running" in res["text"] and "lease_ended" in res["text"]

    # Leaving the with block of a sandbox whose lease ended is not an error.
    assert ending.refresh().end_reason == "lease_ended"
    with ending:
        pass


def test_errors(server: Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(UnauthorizedError) as ei:
        Sandbox.list(base_url=server.url, api_key="wr_wrong")
    assert (ei.value.status, ei.value.code) == (401, "unauthorized")

    with pytest.raises(TransportError, match="cannot reach the Runtime server at http://127.0.0.1:9"):
        Sandbox.list(base_url="http://127.0.0.1:9", api_key="k")

    with pytest.raises(WithRuntimeError, match="must start with http"):
        Client("127.0.0.1:7780")

    # No configuration at all: a message that says what to do.
    monkeypatch.delenv("WITHRUNTIME_URL")
    monkeypatch.delenv("WITHRUNTIME_API_KEY")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    with pytest.raises(NotConfiguredError) as nc:
        Sandbox.create()
    msg = str(nc.value)
    for part in (
        "WITHRUNTIME_URL",
        "WITHRUNTIME_API_KEY",
        "sudo withruntime serve",
        str(tmp_path / "withruntime" / "config.json"),
    ):
        assert part in msg

    # The CLI's config file.
    (tmp_path / "withruntime").mkdir()
    (tmp_path / "withruntime" / "config.json").write_text(json.dumps({"url": server.url, "apiKey": server.key}))
    assert isinstance(Sandbox.list(), list)
    (tmp_path / "withruntime" / "config.json").write_text("{not json")
    with pytest.raises(WithRuntimeError, match="not valid JSON"):
        Sandbox.list()


def test_pause_and_resume(server: Server) -> None:
    with Sandbox.create(timeout_seconds=300) as sbx:
        sbx.files.write_text("kept.txt", "kept")
        sbx.exec('python3 -c \'import time; open("/tmp/alive", "w").write("yes"); time.sleep(3600)\' &')
        info = sbx.pause()
        assert info.state == "paused" and info.image_bytes > 0 and info.paused_at is not None
        with pytest.raises(SandboxPausedError) as e:
            sbx.exec("true")
        assert e.value.status == 409 and e.value.code == "sandbox_paused"
        with pytest.raises(ConflictError):
            sbx.pause()
        assert sbx.id in [s.id for s in Sandbox.list(state="paused")]
        again = Sandbox.connect(sbx.id)  # resumes it
        assert again.info is not None and again.info.state == "running"
        assert again.exec("cat kept.txt /tmp/alive").stdout == "keptyes"
        with pytest.raises(ConflictError):
            again.resume()
        sbx.pause()
        resumed = sbx.resume(timeout_seconds=600)
        assert resumed.state == "running" and resumed.lease_ends_at is not None


def test_pause_filesystem(server: Server) -> None:
    with Sandbox.create(timeout_seconds=300) as sbx:
        sbx.files.write_text("kept.txt", "kept")
        sbx.exec("(setsid sleep 3600 >/dev/null 2>&1 &)")
        info = sbx.pause(mode="filesystem")
        assert info.state == "paused" and info.image_mode == "filesystem" and info.image_bytes > 0
        with pytest.raises(BadRequestError):
            Sandbox.connect(sbx.id).pause(mode="memory")  # connect resumes it first
        assert sbx.refresh().state == "running" and sbx.refresh().image_mode == ""
        assert sbx.exec("cat kept.txt; pgrep -x sleep || echo none").stdout == "keptnone\n"
    with Sandbox.create(timeout_seconds=3, on_lease_end="pause", pause_mode="filesystem") as sbx:
        assert sbx.info is not None and sbx.info.pause_mode == "filesystem"
        sbx.files.write_text("f", "files only")
        deadline = time.monotonic() + 30
        while sbx.refresh().state != "paused" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sbx.refresh().image_mode == "filesystem"
        assert sbx.exec("cat f").stdout == "files only"  # resumes it


def test_lease_end_pauses(server: Server) -> None:
    with Sandbox.create(timeout_seconds=3, on_lease_end="pause") as sbx:
        assert sbx.info is not None and sbx.info.on_lease_end == "pause" and sbx.info.auto_resume
        sbx.files.write_text("f", "still here")
        deadline = time.monotonic() + 30
        while sbx.refresh().state != "paused" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sbx.refresh().state == "paused"
        assert sbx.exec("cat f").stdout == "still here"  # resumes it
        assert sbx.refresh().state == "running"


def test_error_codes_match_the_api() -> None:
    want = {
        "bad_request": 400, "unauthorized": 401, "forbidden": 403, "not_found": 404,
        "method_not_allowed": 405, "timeout": 408, "conflict": 409, "sandbox_paused": 409, "lease_ended": 410,
        "sandbox_stopped": 410, "too_large": 413, "rate_limited": 429, "internal": 500,
        "not_implemented": 501, "unavailable": 503, "no_space": 507, "cost_cap": 400, "spending_limit": 429,
        "range_not_satisfiable": 416, "agent_timeout": 504,
    }  # fmt: skip
    assert {k: v[1] for k, v in withruntime.ERROR_CODES.items()} == want
    from withruntime.errors import api_error

    assert type(api_error(410, "something_new", "m")) is SandboxStoppedError
    assert type(api_error(404, "not_found", "m")) is NotFoundError
    assert type(api_error(418, "teapot", "m")) is APIError


# -- exec ------------------------------------------------------------------


def test_exec_failure_is_a_result(sbx: Sandbox) -> None:
    res = sbx.exec("echo out; echo oops >&2; exit 3")
    assert (res.exit_code, res.stdout, res.stderr, res.ok) == (3, "out\n", "oops\n", False)
    assert res.stdout_bytes == 4 and res.stderr_bytes == 5 and not res.timed_out

    assert sbx.exec("no-such-program").exit_code == 127
    killed = sbx.exec("kill -9 $$")
    assert killed.exit_code == 137 and killed.signal == "SIGKILL"
    slow = sbx.exec("sleep 5", timeout_seconds=0.5)
    assert (slow.exit_code, slow.timed_out) == (124, True)


def test_exec_options(sbx: Sandbox) -> None:
    assert sbx.exec(["python3", "-c", "import sys; print(sys.argv[1])", "a b"]).stdout == "a b\n"
    assert sbx.exec(argv=["pwd"], cwd="/tmp").stdout == "/tmp\n"
    assert sbx.exec("cat", stdin="in\n").stdout == "in\n"
    assert sbx.exec("echo $X", env={"X": "y"}).stdout == "y\n"
    assert sbx.exec("id -u").stdout == "1000\n"
    assert sbx.exec("id -u", user="root").stdout == "0\n"
    capped = sbx.exec("head -c 5000 /dev/zero", max_output_bytes=1000)
    assert capped.stdout_truncated and len(capped.stdout) == 1000 and capped.stdout_bytes == 5000
    lossy = sbx.exec(r"printf 'a\xffb'")
    assert lossy.stdout_lossy and lossy.stdout_data == b"a\xffb" and lossy.stdout == "a\ufffdb"
    assert sbx.run("echo run").stdout == "run\n"

    with pytest.raises(BadRequestError, match="does not exist"):
        sbx.exec("ls", cwd="/no/such/dir")
    with pytest.raises(BadRequestError):
        sbx.exec(argv=["no-such-program"])
    with pytest.raises(TypeError):
        sbx.exec()


def test_exec_stream(sbx: Sandbox) -> None:
    t0 = time.monotonic()
    events = []
    first_stdout_at = None
    stream = sbx.exec_stream("echo one; sleep 1; echo two >&2; printf 'x\\xfe'; exit 5")
    for ev in stream:
        events.append(ev)
        if ev.type == "stdout" and first_stdout_at is None:
            first_stdout_at = time.monotonic() - t0
    total = time.monotonic() - t0
    types = [e.type for e in events]
    assert types[0] == "start" and events[0].pid > 0 and stream.pid == events[0].pid
    assert types[-1] == "exit"
    assert events[-1].result is not None and events[-1].result.exit_code == 5
    assert stream.result is events[-1].result
    assert events[-1].result.stdout == ""  # the output went out as events
    out = b"".join(e.data_bytes for e in events if e.type == "stdout")
    err = "".join(e.data for e in events if e.type == "stderr")
    assert out == b"one\nx\xfe" and err == "two\n"
    # Output arrives as it happens, not at the end.
    assert first_stdout_at is not None and first_stdout_at < total - 0.5

    # exec_to copies output into files as it arrives.
    bout, tout = io.BytesIO(), io.StringIO()
    res = sbx.exec_to("printf 'a\\xff'; echo err >&2; exit 2", stdout=bout, stderr=tout)
    assert (res.exit_code, bout.getvalue(), tout.getvalue()) == (2, b"a\xff", "err\n")

    # wait() drops the output and returns the result.
    assert sbx.exec_stream("exit 4").wait().exit_code == 4

    # Closing a stream early disconnects, which kills the command.
    with sbx.exec_stream("echo started; sleep 1; touch /workspace/finished") as s:
        for ev in s:
            if ev.type == "stdout":
                break
    time.sleep(1.5)
    assert not sbx.files.exists("finished")

    # A command that cannot run raises from the iteration.
    with pytest.raises(BadRequestError):
        list(sbx.exec_stream("ls", cwd="/nope"))


# -- files -----------------------------------------------------------------


def test_binary_round_trip(sbx: Sandbox) -> None:
    data = bytes(range(256)) * 16 + os.urandom(MiB) + b"\x00\xff\xfe"
    info = sbx.files.write_file("bin/data.bin", data)
    assert (info.path, info.size, info.type, info.mode) == ("/workspace/bin/data.bin", len(data), "file", "0644")
    assert sbx.files.read_file("bin/data.bin") == data
    assert sbx.files.read_bytes("/workspace/bin/data.bin") == data
    assert sbx.exec("sha256sum bin/data.bin").stdout.split()[0] == hashlib.sha256(data).hexdigest()

    # Bytes the sandbox wrote come back exactly.
    sbx.exec("head -c 1000 /dev/urandom > rand.bin")
    rand = sbx.files.read_file("rand.bin")
    assert len(rand) == 1000
    assert sbx.exec("sha256sum rand.bin").stdout.split()[0] == hashlib.sha256(rand).hexdigest()

    # File objects: open() is a readable binary file.
    with sbx.files.open("bin/data.bin") as f:
        assert f.size == len(data)
        assert f.read(3) == b"\x00\x01\x02"
        rest = io.BytesIO()
        shutil.copyfileobj(f, rest)
    assert rest.getvalue() == data[3:]


def test_text_and_file_api(sbx: Sandbox, tmp_path: Path) -> None:
    sbx.files.write_text("t/héllo.txt", "héllo wörld\n")
    assert sbx.files.read_text("t/héllo.txt") == "héllo wörld\n"
    assert sbx.files.write_file("t/s.txt", "str is UTF-8").size == len("str is UTF-8")
    assert sbx.files.write_bytes("t/b.txt", b"b").size == 1

    local = tmp_path / "upload.txt"
    local.write_bytes(b"from a file object")
    with open(local, "rb") as f:
        f.read(5)  # from the current position on
        assert sbx.files.write("t/f.txt", f).size == len(b"from a file object") - 5
    assert sbx.files.read_file("t/f.txt") == b"a file object"
    assert sbx.files.write("t/it.txt", iter([b"a", b"", b"bc"])).size == 3
    out = io.BytesIO()
    assert sbx.files.read("t/it.txt", out) == 3 and out.getvalue() == b"abc"

    names = [e.name for e in sbx.files.list("t")]
    assert names == sorted(["b.txt", "f.txt", "héllo.txt", "it.txt", "s.txt"])
    assert any(e.path == "/workspace/t" and e.is_dir for e in sbx.files.list())
    assert len(sbx.files.list("/workspace", depth=2)) >= 6

    st = sbx.files.stat("t")
    assert st.is_dir and st.uid == 1000
    assert sbx.files.mkdir("m").is_dir
    assert sbx.files.mkdir("m/a/b", parents=True).path == "/workspace/m/a/b"
    assert sbx.files.mkdir_all("m/a/b").is_dir
    assert sbx.files.rename("t/b.txt", "m/moved.txt").path == "/workspace/m/moved.txt"
    assert not sbx.files.exists("t/b.txt") and sbx.files.exists("m/moved.txt")
    sbx.files.remove("m/moved.txt")
    with pytest.raises(APIError):
        sbx.files.remove("m")  # not empty
    sbx.files.remove_all("m")
    assert not sbx.files.exists("m")

    with pytest.raises(NotFoundError):
        sbx.files.read_file("no/such/file")
    with pytest.raises(BadRequestError):
        sbx.files.read_file("t")  # a directory


def test_100_mib_file_is_streamed(sbx: Sandbox, tmp_path: Path) -> None:
    """A 100 MiB upload and download go through in chunks: Python's memory
    peak stays a small fraction of the file."""
    size = 100 * MiB
    block = os.urandom(MiB)
    want = hashlib.sha256()

    def chunks() -> Iterator[bytes]:
        for i in range(size // MiB):
            c = block[:-1] + bytes([i])
            want.update(c)
            yield c

    class HashWriter:
        def __init__(self) -> None:
            self.h = hashlib.sha256()
            self.n = 0

        def write(self, b: bytes) -> int:
            self.h.update(b)
            self.n += len(b)
            return len(b)

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        info = sbx.files.write("big.bin", chunks())  # an iterator: chunked upload
        assert info.size == size
        w = HashWriter()
        assert sbx.files.read("big.bin", w) == size  # type: ignore[arg-type]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert w.h.hexdigest() == want.hexdigest()
    assert peak < 16 * MiB, f"peak Python memory {peak / MiB:.1f} MiB for a 100 MiB transfer"
    digest = want.hexdigest()
    assert sbx.exec("sha256sum big.bin").stdout.split()[0] == digest

    # From a file object on disk (Content-Length known), down to a file
    # (smaller, to keep the suite quick).
    size = 32 * MiB
    local = tmp_path / "big.local"
    with open(local, "wb") as f:
        for i in range(size // MiB):
            f.write(block[:-1] + bytes([i]))
    with open(local, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    tracemalloc.start()
    try:
        with open(local, "rb") as f:
            assert sbx.files.write("big2.bin", f).size == size
        with open(tmp_path / "big.down", "wb") as f:
            sbx.files.read("big2.bin", f)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * MiB, f"peak Python memory {peak / MiB:.1f} MiB"
    assert (tmp_path / "big.down").stat().st_size == size
    with open(tmp_path / "big.down", "rb") as f:
        assert hashlib.file_digest(f, "sha256").hexdigest() == digest


def test_ranged_download_and_listing_pages(sbx: Sandbox, tmp_path: Path) -> None:
    """A download from an offset (a Range request) resumes one cut short;
    a listing comes in pages that together hold every entry once."""
    data = bytes(range(256)) * 64
    sbx.files.write_file("r/data.bin", data)
    assert sbx.files.read_file("r/data.bin", offset=100, length=50) == data[100:150]
    assert sbx.files.read_file("r/data.bin", offset=16000) == data[16000:]
    assert sbx.files.read_file("r/data.bin", offset=len(data)) == b""
    assert sbx.files.read_file("r/data.bin", offset=5, length=0) == b""
    with pytest.raises(withruntime.RangeNotSatisfiableError):
        sbx.files.read_file("r/data.bin", offset=len(data) + 1)
    with sbx.files.open("r/data.bin", offset=1000) as f:
        assert f.size == len(data) - 1000
    # A resumed download: the first part, then the rest appended.
    local = tmp_path / "resumed.bin"
    local.write_bytes(data[:7000])
    with open(local, "ab") as out:
        assert sbx.files.read("r/data.bin", out, offset=out.tell()) == len(data) - 7000
    assert local.read_bytes() == data
    # A file that reports size 0 but has content is sent whole; the offset
    # is applied here.
    status = sbx.files.read_file("/proc/self/status")
    assert sbx.files.read_file("/proc/self/status", offset=4, length=3) == status[4:7]

    sbx.exec("mkdir -p r/many && cd r/many && for i in $(seq -w 1 25); do : > f$i; done")
    page = sbx.files.list_page("r/many", limit=10)
    assert len(page.entries) == 10 and page.truncated and page.next and page.total == 25
    names = [e.name for e in page.entries]
    while page.truncated:
        page = sbx.files.list_page("r/many", limit=10, cursor=page.next)
        names += [e.name for e in page.entries]
    assert names == [f"f{i:02d}" for i in range(1, 26)]
    assert [e.name for e in sbx.files.list("r/many")] == names
    assert [e.name for e in sbx.files.entries("r/many")] == names
    with pytest.raises(BadRequestError):
        sbx.files.list_page("r/many", cursor="not-a-cursor!")


# -- the one-shot: a create with its first command -------------------------


def test_run_once_and_create_and_exec(server: Server) -> None:
    with server.client() as c:
        res = c.run_once("echo $A $B; exit 3", env={"A": "create"}, command_env={"B": "command"}, metadata={"t": "once"})
        assert (res.exit_code, res.stdout) == (3, "create command\n")
        [info] = c.list(metadata={"t": "once"})
        assert (info.state, info.end_reason) == ("stopped", "deleted")  # the one-shot destroyed it

        sbx, res = c.create_and_exec(argv=["python3", "-c", "import sys; print(sys.stdin.read()*2)"], stdin="ab")
        try:
            assert (res.exit_code, res.stdout) == (0, "abab\n")
            assert sbx.info is not None and sbx.info.state == "running"
            assert sbx.exec("echo again").stdout == "again\n"
        finally:
            sbx.kill()

        # A command that cannot run: the sandbox exists, the error says why.
        with pytest.raises(BadRequestError) as ei:
            c.create_and_exec("true", cwd="/nowhere", metadata={"t": "nowhere"})
        made = ei.value.sandbox  # type: ignore[attr-defined]
        assert "/nowhere" in ei.value.message and made.refresh().state == "running"
        made.kill()

        # Bad input in the command: refused before anything boots.
        with pytest.raises(BadRequestError):
            c.run_once("true", user="bob", metadata={"t": "refused"})
        assert c.list(metadata={"t": "refused"}) == []
