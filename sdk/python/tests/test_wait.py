"""Bounded waits (issue 24, F11): a server that accepted the connection and
stopped answering is a ServerTimeoutError naming it and the seconds waited;
a quiet command is not mistaken for one (the server's heartbeats). The
stopped servers here are local sockets that accept and never answer, as a
server under SIGSTOP does; the quiet command runs on the real test server."""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from withruntime import AsyncClient, Client, Sandbox, ServerTimeoutError, TransportError
from withruntime._async import AsyncSandbox

from .conftest import Server


@pytest.fixture
def silent() -> Iterator[str]:
    """A server that accepts connections and never answers."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        ls.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(ls.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{ls.getsockname()[1]}"
    stop.set()
    t.join()
    for s in held:
        s.close()
    ls.close()


_EXIT = (
    '{"type":"exit","result":{"exitCode":0,"stdout":"","stderr":"","stdoutTruncated":false,'
    '"stderrTruncated":false,"stdoutBytes":5,"stderrBytes":0,"timedOut":false,"durationMs":600}}'
)


@pytest.fixture
def streams() -> Iterator[str]:
    """An HTTP server whose exec streams start, then send heartbeats and end
    (path with "beats") or say nothing more."""
    release = threading.Event()

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *a: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.end_headers()
            self.wfile.write(b'{"type":"start","pid":3}\n')
            self.wfile.flush()
            if "beats" not in self.path:
                release.wait(30)
                return
            for _ in range(6):
                time.sleep(0.1)
                self.wfile.write(b'{"type":"heartbeat"}\n')
                self.wfile.flush()
            self.wfile.write(b'{"type":"stdout","data":"done\\n"}\n' + _EXIT.encode() + b"\n")

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    release.set()
    srv.shutdown()
    srv.server_close()


def test_stopped_server(silent: str) -> None:
    c = Client(silent, "wr_x", response_timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(ServerTimeoutError) as ei:
        c.list()
    took = time.monotonic() - t0
    e = ei.value
    assert isinstance(e, TimeoutError) and isinstance(e, TransportError)
    assert not e.idle and e.server == silent and e.seconds == 0.5
    assert f"{silent} did not answer GET /v1/sandboxes within 0.5 s" in str(e)
    assert 0.45 <= took < 5, took
    # A collected exec waits for its own timeout besides: 0.5 s + 1 s.
    t0 = time.monotonic()
    with pytest.raises(ServerTimeoutError) as ei:
        Sandbox(c, "sbx_1").exec("true", timeout_seconds=1)
    assert ei.value.seconds == 1.5 and time.monotonic() - t0 >= 1.4


def test_stopped_server_async(silent: str) -> None:
    async def go() -> None:
        async with AsyncClient(silent, "wr_x", response_timeout=0.5) as c:
            with pytest.raises(ServerTimeoutError) as ei:
                await c.list()
            assert "within 0.5 s" in str(ei.value)

    asyncio.run(go())


def test_stream_idle(streams: str) -> None:
    c = Client(streams, "k", idle_timeout=0.3)
    types = [ev.type for ev in Sandbox(c, "sbx_beats").exec_stream("sleep 1")]
    assert types == ["start", "stdout", "exit"]  # heartbeats are never yielded
    t0 = time.monotonic()
    with pytest.raises(ServerTimeoutError) as ei:
        for _ in Sandbox(c, "sbx_stall").exec_stream("sleep 100"):
            pass
    assert ei.value.idle and "sent nothing for 0.3 s" in str(ei.value)
    assert time.monotonic() - t0 < 5


def test_stream_idle_async(streams: str) -> None:
    async def go() -> None:
        async with AsyncClient(streams, "k", idle_timeout=0.3) as c:
            types = [ev.type async for ev in AsyncSandbox(c, "sbx_beats").exec_stream("sleep 1")]
            assert types == ["start", "stdout", "exit"]
            with pytest.raises(ServerTimeoutError):
                async for _ in AsyncSandbox(c, "sbx_stall").exec_stream("sleep 100"):
                    pass

    asyncio.run(go())


def test_bounds_checked() -> None:
    with pytest.raises(TypeError):
        Client("http://x", "k", response_timeout=-1)
    Client("http://x", "k", response_timeout=None, idle_timeout=0)  # no bounds


def test_quiet_command(server: Server) -> None:
    """12 s of silence under a 5 s idle timeout runs to its end, and a
    collected exec longer than the response timeout gets its answer."""
    with Client(server.url, server.key, idle_timeout=5, response_timeout=5) as c:
        with c.create(timeout_seconds=300) as sbx:
            out = "".join(ev.data for ev in sbx.exec_stream("sleep 12; echo done") if ev.type == "stdout")
            assert out == "done\n"
            assert sbx.exec("sleep 8; echo late", timeout_seconds=30).stdout == "late\n"
