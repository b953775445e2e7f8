"""A server that accepted the connection and then went silent (stopped with
SIGSTOP: the kernel still accepts for it) fails the SDK's calls within their
request_timeout instead of holding them (issue 24, F11). The stopped server
is a local socket that accepts and never answers, which is what a stopped
``withruntime serve --e2b-listen`` is to a client (the facade lives in the
server's process); the messages are the SDK's own."""

import socket
import threading
import time

import pytest
from e2b import Sandbox, TimeoutException


@pytest.fixture()
def silent():
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    ls.settimeout(0.1)
    held, stop = [], threading.Event()

    def accept():
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


def test_control_plane_times_out(silent):
    t0 = time.monotonic()
    with pytest.raises(Exception) as ei:
        Sandbox.list(api_url=silent, request_timeout=2).next_items()
    took = time.monotonic() - t0
    assert 1.5 <= took < 15, f"{took:.1f} s: {ei.value!r}"
    assert "time" in (str(ei.value) + type(ei.value).__name__).lower(), repr(ei.value)


def test_envd_times_out(sandbox, silent):
    # A command's stream is bounded by its timeout (the SDK's default 60 s),
    # the rest of a call by request_timeout.
    sb = Sandbox.connect(sandbox.sandbox_id, sandbox_url=silent)
    t0 = time.monotonic()
    with pytest.raises(TimeoutException):
        sb.commands.run("echo never", timeout=3, request_timeout=2)
    took = time.monotonic() - t0
    assert 1.5 <= took < 15, f"{took:.1f} s"
