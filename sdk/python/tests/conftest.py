"""Test fixtures: one real Runtime server for the session (``withruntime
serve`` on a free port with a temporary data directory, real gVisor
sandboxes), and sandboxes on it.

The server binary is ``withruntime`` from PATH (installed by
scripts/install.sh), or $WITHRUNTIME_BIN. It needs root.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from withruntime import Client, Sandbox

#: The repository root, when the tests run from a clone (sdk/python/tests/..).
REPO = Path(__file__).resolve().parents[3]
GO_TOOLS_TESTDATA = REPO / "sdk" / "go" / "tools" / "testdata"
TEMPLATES_DIR = os.environ.get("WITHRUNTIME_TEMPLATES_DIR", "/var/lib/withruntime/templates")


@dataclass
class Server:
    url: str
    key: str
    data_dir: Path
    proc: subprocess.Popen[bytes]
    log_path: Path

    def client(self) -> Client:
        return Client(self.url, self.key)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, key: str = "") -> tuple[int, bytes]:
    req = urllib.request.Request(url)
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    binary = os.environ.get("WITHRUNTIME_BIN") or shutil.which("withruntime")
    if not binary:
        pytest.fail("withruntime is not on PATH: run scripts/install.sh (or set WITHRUNTIME_BIN)")
    if os.geteuid() != 0:
        pytest.fail("the tests start a real Runtime server, which needs root (gVisor): run them as root")
    data = tmp_path_factory.mktemp("withruntime-server")
    log_path = data / "server.log"
    # A templates directory of the server's own, linking the installed
    # templates (never written): the template tests make and delete theirs
    # here.
    templates = data / "templates"
    templates.mkdir()
    for entry in sorted(Path(TEMPLATES_DIR).iterdir()):
        if entry.is_dir() and not entry.name.startswith("."):
            (templates / entry.name).symlink_to(entry)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                binary,
                "serve",
                "--listen",
                f"127.0.0.1:{port}",
                "--data-dir",
                str(data),
                "--templates-dir",
                str(templates),
                "--no-build",
                # Sample usage every second (default 5 s), so that a
                # running sandbox's cost shows soon.
                "--meter-interval",
                "1s",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    srv = Server(url=url, key="", data_dir=data, proc=proc, log_path=log_path)
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            pytest.fail(f"withruntime serve exited with {proc.returncode}:\n{srv.log()}")
        try:
            if _get(url + "/v1/health")[0] == 200 and (data / "local.key").exists():
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"withruntime serve did not answer /v1/health within 60s:\n{srv.log()}")
        time.sleep(0.1)
    srv.key = (data / "local.key").read_text().strip()

    mp = pytest.MonkeyPatch()
    mp.setenv("WITHRUNTIME_URL", url)
    mp.setenv("WITHRUNTIME_API_KEY", srv.key)
    try:
        yield srv
    finally:
        mp.undo()
        # Sandboxes outlive their server (the next one adopts them): destroy
        # whatever the tests left running before stopping it.
        try:
            status, body = _get(url + "/v1/sandboxes?state=running", srv.key)
            if status == 200:
                for s in json.loads(body).get("sandboxes", []):
                    req = urllib.request.Request(
                        f"{url}/v1/sandboxes/{s['id']}",
                        method="DELETE",
                        headers={"Authorization": "Bearer " + srv.key},
                    )
                    try:
                        urllib.request.urlopen(req, timeout=30).close()
                    except OSError:
                        pass
            # Volumes too: each holds a loop device and a mount on the host.
            status, body = _get(url + "/v1/volumes", srv.key)
            if status == 200:
                for v in json.loads(body).get("volumes", []):
                    req = urllib.request.Request(
                        f"{url}/v1/volumes/{v['name']}",
                        method="DELETE",
                        headers={"Authorization": "Bearer " + srv.key},
                    )
                    try:
                        urllib.request.urlopen(req, timeout=30).close()
                    except OSError:
                        pass
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        _check_no_leaks(data)
        shutil.rmtree(data / "gvisor", ignore_errors=True)


def _check_no_leaks(data: Path) -> None:
    """Warns about (and removes) gVisor containers left behind in the test
    server's data directory: every sandbox was destroyed through the API."""
    runsc = os.environ.get("WITHRUNTIME_RUNSC") or shutil.which("runsc") or "/usr/local/bin/runsc"
    root = data / "gvisor" / "runsc"
    if not root.exists():
        return
    try:
        out = subprocess.run([runsc, "--root", str(root), "list", "--quiet"], capture_output=True, text=True)
        leaked = out.stdout.split()
        for cid in leaked:
            subprocess.run([runsc, "--root", str(root), "delete", "--force", cid], capture_output=True)
    except OSError:
        leaked = []
    if leaked:
        warnings.warn(f"the test server left gVisor containers behind: {leaked}", stacklevel=1)
    # runsc keeps a namespace bind-mounted in its root; unmount it so that
    # the data directory can be removed.
    netns = root / "null-netns"
    if os.path.ismount(netns):
        subprocess.run(["umount", str(netns)], capture_output=True)


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    with server.client() as c:
        yield c


@pytest.fixture
def sbx(server: Server) -> Iterator[Sandbox]:
    """A fresh sandbox on the test server, destroyed after the test."""
    with Sandbox.create(timeout_seconds=300, metadata={"test": "python-sdk"}) as s:
        yield s


@pytest.fixture(scope="session")
def code_template(server: Server) -> str:
    """The code-interpreter template, built in the test server's templates
    directory if it is missing or stale (a few minutes once, then cached)."""
    binary = os.environ.get("WITHRUNTIME_BIN") or shutil.which("withruntime") or "withruntime"
    env = {k: v for k, v in os.environ.items() if k not in ("WITHRUNTIME_URL", "WITHRUNTIME_API_KEY")}
    out = subprocess.run(
        [binary, "template", "build", "--missing", "--templates-dir", TEMPLATES_DIR, "code-interpreter"],
        capture_output=True,
        text=True,
        env=env,
    )
    if out.returncode != 0:
        pytest.fail(f"building the code-interpreter template failed:\n{out.stderr[-4000:]}")
    return "code-interpreter"


@pytest.fixture
def ci(code_template: str) -> Iterator[Sandbox]:
    """A fresh code-interpreter sandbox, destroyed after the test."""
    with Sandbox.create(template=code_template, timeout_seconds=300, metadata={"test": "python-sdk"}) as s:
        yield s


def go_testdata(name: str) -> Path:
    path = GO_TOOLS_TESTDATA / name
    if not path.exists():
        pytest.skip(f"{path} not found (the tests are not running from a clone of the repository)")
    return path
