"""E2B's domain mode: the unmodified SDKs given only E2B_DOMAIN and
E2B_API_KEY, against `withruntime serve --e2b-domain` (compat/e2b/run.sh
serves the domain over TLS with a test CA, its names resolved to a loopback
address by a DNS server of the run's own). The SDK reaches the API at
https://api.DOMAIN and each sandbox at https://PORT-SANDBOX.DOMAIN;
sandbox.get_host(port) is the host of a program listening in the sandbox."""

import os
import ssl
import time
import urllib.error
import urllib.request

import pytest
from e2b import Sandbox
from e2b_code_interpreter import Sandbox as CodeSandbox

DOMAIN = os.environ.get("E2B_DOMAIN", "")


@pytest.fixture(autouse=True)
def domain_env():
    for name in ("E2B_DOMAIN", "E2B_API_KEY"):
        if not os.environ.get(name):
            pytest.fail(f"{name} is not set: run the suite with compat/e2b/run.sh")
    for name in ("E2B_API_URL", "E2B_SANDBOX_URL"):
        if os.environ.get(name):
            pytest.fail(f"{name} is set: the domain tests use E2B_DOMAIN alone")


def fetch(url, headers=None, wait=20.0):
    """GET url over TLS (verified against SSL_CERT_FILE): (status, body).
    Retries while nothing listens yet (502)."""
    ctx = ssl.create_default_context()
    end = time.monotonic() + wait
    while True:
        req = urllib.request.Request(url, headers=headers or {})
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            body = e.read().decode()
            if e.code != 502 or time.monotonic() > end:
                return e.code, body
        time.sleep(0.2)


def serve_dir(sbx, port, text):
    sbx.files.write(f"/home/user/site{port}/index.html", text)
    sbx.commands.run(f"cd /home/user/site{port} && python3 -m http.server {port}", background=True)


def test_get_host_reaches_a_web_server_in_the_sandbox():
    with Sandbox.create(timeout=120) as sbx:
        # The data plane went through https://49983-SANDBOX.DOMAIN.
        assert sbx.commands.run("echo hi").stdout == "hi\n"
        serve_dir(sbx, 8000, "hello from the sandbox")
        host = sbx.get_host(8000)
        assert host == f"8000-{sbx.sandbox_id}.{DOMAIN}"
        status, body = fetch(f"https://{host}/index.html")
        assert (status, body) == (200, "hello from the sandbox")
        # A port nobody listens on: 502, not another sandbox's or the host's.
        status, _ = fetch(f"https://{sbx.get_host(8999)}/", wait=0)
        assert status == 502


def test_private_traffic_needs_the_traffic_access_token():
    with Sandbox.create(timeout=120, network={"allow_public_traffic": False}) as sbx:
        serve_dir(sbx, 8001, "private page")
        url = f"https://{sbx.get_host(8001)}/index.html"
        assert fetch(url, wait=0)[0] == 403
        assert fetch(url, {"e2b-traffic-access-token": "wre2b_not-a-token"}, wait=0)[0] == 403
        token = sbx.traffic_access_token
        assert token
        assert fetch(url, {"e2b-traffic-access-token": token}) == (200, "private page")
        # Another sandbox's token opens nothing here.
        with Sandbox.create(timeout=60) as other:
            assert fetch(url, {"e2b-traffic-access-token": other.traffic_access_token}, wait=0)[0] == 403


def test_code_interpreter_in_domain_mode():
    with CodeSandbox.create(timeout=180) as sbx:
        ex = sbx.run_code("x = 6 * 7\nx")
        assert ex.text == "42"


UPGRADE_ECHO = """
import socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8004)); s.listen(8)
def run(c):
    data = b""
    while b"\\r\\n\\r\\n" not in data:
        data += c.recv(4096)
    c.sendall(b"HTTP/1.1 101 Switching Protocols\\r\\nConnection: Upgrade\\r\\nUpgrade: echo\\r\\n\\r\\n")
    while True:
        b = c.recv(4096)
        if not b:
            break
        c.sendall(b)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=run, args=(c,), daemon=True).start()
"""


def test_an_upgraded_connection_through_get_host():
    """What a WebSocket does: Connection: Upgrade, then bytes both ways,
    over TLS to the sandbox's host."""
    import socket

    with Sandbox.create(timeout=120) as sbx:
        sbx.files.write("/home/user/echo.py", UPGRADE_ECHO)
        sbx.commands.run("python3 /home/user/echo.py", background=True)
        host = sbx.get_host(8004)
        ctx = ssl.create_default_context()
        ctx.set_alpn_protocols(["http/1.1"])
        end = time.monotonic() + 20
        while True:
            sock = ctx.wrap_socket(socket.create_connection((host, 443), timeout=10), server_hostname=host)
            sock.sendall(f"GET /ws HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                head += chunk
            if head.startswith(b"HTTP/1.1 101") or time.monotonic() > end:
                break
            sock.close()
            time.sleep(0.2)
        assert head.startswith(b"HTTP/1.1 101"), head
        rest = head.split(b"\r\n\r\n", 1)[1]
        for msg in (b"ping", b"z" * 50000):
            sock.sendall(msg)
            got = rest
            while len(got) < len(msg):
                got += sock.recv(65536)
            assert got == msg
            rest = b""
        sock.close()


def test_signed_file_urls():
    """download_url and upload_url work with no header at all, for their
    own path and operation, until they expire, while the sandbox runs; a
    tampered signature, another path, or a killed sandbox is refused."""
    import urllib.parse
    import uuid

    sbx = Sandbox.create(timeout=120)
    try:
        sbx.files.write("/home/user/report.txt", "quarterly numbers")
        sbx.files.write("/home/user/private.txt", "not for the URL")
        url = sbx.download_url("/home/user/report.txt", use_signature_expiration=120)
        assert "signature=v1_" in url and "signature_expiration=" in url
        assert fetch(url) == (200, "quarterly numbers")

        # Upload: a multipart POST to the URL, as E2B documents it.
        up = sbx.upload_url("/home/user/uploaded.txt")
        boundary = uuid.uuid4().hex
        body = (
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"uploaded.txt\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\nsent with no key\r\n--{boundary}--\r\n"
        ).encode()
        req = urllib.request.Request(up, data=body, method="POST",
                                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        with urllib.request.urlopen(req, context=ssl.create_default_context(), timeout=10) as r:
            assert r.status == 200
        assert sbx.files.read("/home/user/uploaded.txt") == "sent with no key"

        def with_query(u, **changes):
            p = urllib.parse.urlsplit(u)
            q = dict(urllib.parse.parse_qsl(p.query))
            q.update(changes)
            return urllib.parse.urlunsplit(p._replace(query=urllib.parse.urlencode(q)))

        sig = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["signature"][0]
        tampered = sig[:-1] + ("A" if sig[-1] != "A" else "B")
        assert fetch(with_query(url, signature=tampered))[0] == 401
        status, answer = fetch(with_query(url, path="/home/user/private.txt"))
        assert status == 401 and "not for the URL" not in answer
        assert fetch(with_query(url, signature_expiration="99999999999"))[0] == 401
        expired = sbx.download_url("/home/user/report.txt", use_signature_expiration=-5)
        assert fetch(expired) == (401, '{"code":401,"message":"signature is already expired"}\n')
        # A read URL does not write.
        req = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, context=ssl.create_default_context(), timeout=10)
        assert e.value.code == 401
    finally:
        sbx.kill()
    assert fetch(url, wait=0)[0] == 502


def test_mask_request_host():
    """network.mask_request_host sets the Host header a program in the
    sandbox sees on requests to its ports, ${PORT} replaced by the port."""
    sbx = Sandbox.create(timeout=120, network={"mask_request_host": "masked.example.com:${PORT}"})
    try:
        sbx.commands.run(
            "python3 -c \"\nimport http.server\nclass H(http.server.BaseHTTPRequestHandler):\n"
            "    def do_GET(self):\n        b = self.headers['Host'].encode()\n        self.send_response(200)\n"
            "        self.send_header('Content-Length', str(len(b)))\n        self.end_headers()\n        self.wfile.write(b)\n"
            "    def log_message(self, *a): pass\nhttp.server.HTTPServer(('', 8091), H).serve_forever()\n\"",
            background=True,
        )
        assert fetch(f"https://{sbx.get_host(8091)}/") == (200, "masked.example.com:8091")
        assert sbx.get_info().network["mask_request_host"] == "masked.example.com:${PORT}"
    finally:
        sbx.kill()
    with pytest.raises(Exception) as e:
        Sandbox.create(timeout=60, network={"mask_request_host": "http://bad/"})
    assert "maskRequestHost" in str(e.value)
