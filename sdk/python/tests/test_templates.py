"""Templates from images and Dockerfiles, sync and async, against the real
server (whose templates directory is the test session's own, see
conftest), and the SDK's .dockerignore matcher and context tar."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from withruntime import (
    AsyncClient,
    BadRequestError,
    Client,
    ConflictError,
    NotFoundError,
    Sandbox,
    TemplateEvent,
)
from withruntime._archive import CONTEXT_DOCKERFILE, Dockerignore, build_request

from .conftest import REPO, TEMPLATES_DIR, Server

DOCKERIGNORE_CASES = REPO / "sdk" / "go" / "testdata" / "dockerignore.json"


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tw:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            if name.endswith("/"):
                info.type, info.size = tarfile.DIRTYPE, 0
            tw.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def dash_image() -> tuple[bytes, bytes]:
    """A tiny linux/amd64 image, a layer and its config: dash as /bin/sh
    with the C library it needs, from the base template."""
    base = Path(TEMPLATES_DIR) / "base" / "rootfs"
    layer = _tar(
        {
            "bin/": b"",
            "bin/sh": (base / "usr/bin/dash").read_bytes(),
            "lib/": b"",
            "lib/x86_64-linux-gnu/": b"",
            "lib/x86_64-linux-gnu/libc.so.6": (base / "usr/lib/x86_64-linux-gnu/libc.so.6").read_bytes(),
            "lib64/": b"",
            "lib64/ld-linux-x86-64.so.2": (base / "usr/lib64/ld-linux-x86-64.so.2").read_bytes(),
        }
    )
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Env": ["GREETING=hi"]},
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]},
        }
    ).encode()
    return layer, config


def docker_save(layer: bytes, config: bytes) -> bytes:
    """The image as `docker save` writes it: manifest.json, config, layer."""
    manifest = [{"Config": "config.json", "RepoTags": ["example.test/dash:1"], "Layers": ["layer/layer.tar"]}]
    return _tar({"manifest.json": json.dumps(manifest).encode(), "config.json": config, "layer/layer.tar": layer})


def oci_layout(dir: Path, layer: bytes, config: bytes) -> None:
    """The image as an OCI image layout directory."""

    def blob(data: bytes) -> dict[str, object]:
        h = hashlib.sha256(data).hexdigest()
        (dir / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
        (dir / "blobs" / "sha256" / h).write_bytes(data)
        return {"digest": "sha256:" + h, "size": len(data)}

    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **blob(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **blob(layer)}],
    }
    desc = {
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        **blob(json.dumps(manifest).encode()),
        "platform": {"os": "linux", "architecture": "amd64"},
    }
    (dir / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (dir / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [desc]}))


def test_templates_from_images(server: Server, tmp_path: Path) -> None:
    layer, config = dash_image()
    tarball = tmp_path / "dash.tar"
    tarball.write_bytes(docker_save(layer, config))
    steps: list[TemplateEvent] = []
    with server.client() as c:
        t = c.create_template("py-tar", tarball, on_event=steps.append)
        assert t.name == "py-tar" and t.size_bytes > 0 and t.origin is not None
        assert (t.origin.image, t.origin.shell, t.origin.env) == (str(tarball), "/bin/sh", ["GREETING=hi"])
        assert steps and all(ev.type == "step" for ev in steps)
        assert c.get_template("py-tar") == t
        assert "py-tar" in [x.name for x in c.list_templates()]

        with Sandbox.create(template="py-tar", client=c) as sbx:
            res = sbx.exec(["/bin/sh", "-c", "echo ok $GREETING"])
            assert (res.exit_code, res.stdout) == (0, "ok hi\n")
            with pytest.raises(ConflictError) as e:
                c.delete_template("py-tar")
            assert sbx.id in e.value.message

        with pytest.raises(ConflictError):
            c.create_template("py-tar", tarball)
        with pytest.raises(NotFoundError):
            c.create_template("py-missing", str(tmp_path / "missing.tar"))
        with pytest.raises(BadRequestError, match="docker save"):
            c.upload_template("py-bad", b"not a tarball")
        with pytest.raises(BadRequestError, match="oci-layout file"):
            c.create_template("py-bad", f"oci-layout:{tmp_path}")
        c.delete_template("py-tar")
        with pytest.raises(NotFoundError):
            c.get_template("py-tar")

    async def main() -> None:
        oci_layout(tmp_path / "oci", layer, config)
        seen: list[str] = []

        async def on_event(ev: TemplateEvent) -> None:
            seen.append(ev.type)

        async with AsyncClient(server.url, server.key) as ac:
            for name, src in {"py-layout": f"oci-layout:{tmp_path / 'oci'}", "py-upload": None}.items():
                if src is None:
                    t = await ac.upload_template(name, docker_save(layer, config), label="bytes", on_event=on_event)
                    assert t.origin is not None and t.origin.image == "bytes"
                else:
                    t = await ac.create_template(name, src, on_event=on_event)
                    assert t.origin is not None and t.origin.image == src
                async with await ac.create(template=name) as sbx:
                    res = await sbx.exec(["/bin/sh", "-c", "echo ok"])
                    assert res.stdout == "ok\n"
                await ac.delete_template(name)
                with pytest.raises(NotFoundError):
                    await ac.get_template(name)
            assert seen and set(seen) == {"step"}
            with pytest.raises(ConflictError):
                await ac.create_template("base", tarball)

    asyncio.run(main())


def test_template_from_dockerfile(server: Server, tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    (ctx / "app").mkdir(parents=True)
    (ctx / "app" / "main.sh").write_text("echo built app\n")
    (ctx / "secret.txt").write_text("not sent\n")
    (ctx / ".dockerignore").write_text("secret.txt\n")
    (ctx / "Dockerfile").write_text(
        'FROM base\nARG WHO\nENV APP=/srv/app\nCOPY . /srv/app/\nRUN echo "building for $WHO" && echo $WHO > /srv/app/who\n'
    )
    output: list[str] = []
    with server.client() as c:
        t = c.build_template("py-built", ctx, build_args={"WHO": "py"}, on_event=lambda ev: output.append(ev.data))
        assert "building for py" in "".join(output)
        with Sandbox.create(template=t.name, client=c) as sbx:
            res = sbx.exec("sh $APP/app/main.sh; cat $APP/who; ls -A $APP | tr '\\n' ' '")
            assert res.stdout == "built app\npy\n.dockerignore Dockerfile app who "
        c.delete_template("py-built")
        with pytest.raises(BadRequestError, match="ENTRYPOINT is not supported"):
            c.build_template("py-refused", ctx, dockerfile_content='FROM base\nENTRYPOINT ["sh"]\n')
        with pytest.raises(NotFoundError):
            c.build_template("py-refused", ctx / "missing")


def test_dockerignore_matches_docker() -> None:
    if not DOCKERIGNORE_CASES.exists():
        pytest.skip(f"{DOCKERIGNORE_CASES} not found (the tests are not running from a clone of the repository)")
    for case in json.loads(DOCKERIGNORE_CASES.read_text())["cases"]:
        d = Dockerignore(case["patterns"])
        for path, want in case["paths"].items():
            assert d.excluded(path) == want, (case["patterns"], path)


def test_build_context_archive(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    for name, body in {
        "Dockerfile": "FROM base\n",
        "app/main.py": "print(1)\n",
        "app/debug.log": "x",
        "secret.txt": "no",
        "node_modules/big/index.js": "x",
        ".dockerignore": "secret.txt\n**/*.log\nnode_modules\n",
        CONTEXT_DOCKERFILE: "from the context",
    }.items():
        (ctx / name).parent.mkdir(parents=True, exist_ok=True)
        (ctx / name).write_text(body)
    (ctx / "link").symlink_to("app/main.py")

    def members(req_body: Iterator[bytes]) -> dict[str, str]:
        data = b"".join(req_body)
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            out = {}
            for m in tf.getmembers():
                f = tf.extractfile(m)
                out[m.name + ("/" if m.isdir() else "")] = (
                    "-> " + m.linkname if m.issym() else f.read().decode() if f else ""
                )
            return out

    req = build_request(
        "app",
        ctx,
        dockerfile=None,
        dockerfile_content=None,
        build_args={"B": "2", "A": "1"},
        internet=True,
        allow=["h"],
    )
    assert req.params == [
        ("name", "app"),
        ("dockerfile", "Dockerfile"),
        ("buildArg", "A=1"),
        ("buildArg", "B=2"),
        ("internet", "true"),
        ("allow", "h"),
    ]
    files = members(req.body)
    assert sorted(files) == [".dockerignore", "Dockerfile", "app/", "app/main.py", "link"]
    assert files["link"] == "-> app/main.py"

    outside = tmp_path / "Dockerfile.dev"
    outside.write_text("FROM other\n")
    kws: list[dict[str, Any]] = [
        {"dockerfile": outside, "dockerfile_content": None},
        {"dockerfile": None, "dockerfile_content": "FROM other\n"},
    ]
    for kw in kws:
        req = build_request("app", ctx, build_args=None, internet=False, allow=None, **kw)
        assert ("dockerfile", CONTEXT_DOCKERFILE) in req.params
        assert members(req.body)[CONTEXT_DOCKERFILE] == "FROM other\n"
    with pytest.raises(TypeError):
        build_request("app", ctx, dockerfile=None, dockerfile_content=None, build_args=None, internet=False, allow="h")


def test_template_errors_without_server(tmp_path: Path) -> None:
    c = Client("http://127.0.0.1:9", "wr_x")
    with pytest.raises(NotFoundError):
        c.build_template("x", tmp_path / "missing")
    with pytest.raises(NotFoundError, match="Dockerfile"):
        c.build_template("x", tmp_path)
