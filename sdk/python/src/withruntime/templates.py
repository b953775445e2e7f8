"""Templates: the root filesystems sandboxes start from, made on the server
from a container image or a Dockerfile.

:class:`~withruntime.Client` and :class:`~withruntime.AsyncClient` have the
same methods (the async ones awaited)::

    t = client.create_template("py312", "python:3.12-slim")          # pulled by the server
    t = client.create_template("mine", "./image.tar")                # a `docker save` tarball, uploaded
    t = client.create_template("mine2", "oci-layout:./image-oci")    # an OCI layout, uploaded
    t = client.build_template("app", "./app", build_args={"V": "2"}, allow=["pypi.mirror.example"],
                              on_event=lambda ev: print(ev.step or ev.data, end=""))
    with Sandbox.create(template=t.name) as sbx: ...
    client.list_templates(); client.get_template("app"); client.delete_template("app")

Making, uploading or building a template needs an admin key. Errors are the
API's: :class:`~withruntime.ConflictError` (the name is taken, or a delete
while sandboxes use it), :class:`~withruntime.BadRequestError` (a bad
reference, tarball or layer, a wrong architecture, an unsupported
Dockerfile instruction, a failing ``RUN`` with its exit code and last output
in the message), :class:`~withruntime.NotFoundError` (no such image, file or
template), :class:`~withruntime.TooLargeError` (over the server's size cap).
A failed or interrupted build leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import json
import os
import posixpath
import re
import stat
import tarfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from . import _http
from .errors import WithRuntimeError, api_error, status_of_code
from .types import ErrorInfo, parse_time

if TYPE_CHECKING:
    import httpx

__all__ = [
    "Template",
    "TemplateOrigin",
    "TemplateEvent",
    "ImageRef",
    "OnTemplateEvent",
    "AsyncOnTemplateEvent",
]

#: Where a Dockerfile from outside the build context goes in the context's
#: tar; the server's COPY and ADD leave it out.
CONTEXT_DOCKERFILE = ".withruntime.Dockerfile"
#: The longest upload label the server takes, in bytes.
MAX_LABEL_BYTES = 1024
#: The most an OCI layout's index or manifest may be, in bytes.
_MAX_LAYOUT_JSON = 4 << 20
_DIGEST = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+")
_INDEX_TYPES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")
_MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json")
_BLOCK = 512


@dataclass(frozen=True)
class TemplateOrigin:
    """Where a template made from an image or a Dockerfile came from."""

    #: The image reference it was made from, or an upload's label.
    image: str
    #: What runs a command line: ``"/bin/bash"``, ``"/bin/sh"``, or ``""``
    #: when the image has no shell (then only an argv runs).
    shell: str
    #: The image manifest's digest (``"sha256:..."``), or ``""``.
    digest: str = ""
    #: The image's environment (``"KEY=value"``); the template's sandboxes
    #: start with it, under a create's ``env``.
    env: list[str] = field(default_factory=list)
    #: The image's working directory, recorded only: commands start in
    #: /workspace.
    working_dir: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TemplateOrigin:
        return cls(
            image=d.get("image", "") or "",
            shell=d.get("shell", "") or "",
            digest=d.get("digest", "") or "",
            env=[str(e) for e in d.get("env") or []],
            working_dir=d.get("workingDir", "") or "",
        )


@dataclass(frozen=True)
class Template:
    """A root filesystem sandboxes start from (``create(template=name)``)."""

    #: What ``create(template=...)`` names.
    name: str
    #: When it was built (UTC).
    created_at: datetime | None
    #: Its root filesystem's size on disk, in bytes.
    size_bytes: int
    #: Where a template made from an image or a Dockerfile came from; None
    #: for one built from a built-in recipe (``base``).
    origin: TemplateOrigin | None = None
    _raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Template:
        o = d.get("origin")
        return cls(
            name=d.get("name", ""),
            created_at=parse_time(d.get("createdAt")),
            size_bytes=int(d.get("sizeBytes", 0) or 0),
            origin=TemplateOrigin.from_dict(o) if isinstance(o, Mapping) else None,
            _raw=dict(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The template as the server sent it (camelCase keys)."""
        return dict(self._raw)


@dataclass(frozen=True)
class TemplateEvent:
    """One event of a template build's progress, as ``on_event`` receives
    it: ``"step"`` (a step begins, or ends when ``done``: pulling and
    extracting a layer, a Dockerfile instruction) or ``"output"`` (what a
    ``RUN`` printed, in ``data``). The build's result is what the method
    returns (``"template"``) or raises (``"error"``)."""

    type: str
    #: What the step does, such as ``"pulling and extracting layer 2/3
    #: (sha256:...), 12.0 MiB compressed"`` (step events).
    step: str = ""
    #: The step ended (step events).
    done: bool = False
    #: What a RUN step printed, stdout and stderr together (output events).
    data: str = ""
    #: Seconds since the build started.
    elapsed_seconds: float = 0.0
    #: The new template (template events).
    template: Template | None = None
    #: Why the build failed (error events).
    error: ErrorInfo | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TemplateEvent:
        t = d.get("template")
        e = d.get("error")
        return cls(
            type=d.get("type", ""),
            step=d.get("step", "") or "",
            done=bool(d.get("done", False)),
            data=d.get("data", "") or "",
            elapsed_seconds=float(d.get("elapsedSeconds", 0) or 0),
            template=Template.from_dict(t) if isinstance(t, Mapping) else None,
            error=ErrorInfo(str(e.get("code", "")), str(e.get("message", ""))) if isinstance(e, Mapping) else None,
        )


#: An image for ``create_template``: a registry reference (a str), or a
#: local path (a str by the rules there, or any ``os.PathLike``).
ImageRef = str | os.PathLike[str]
#: ``on_event`` of the sync client.
OnTemplateEvent = Callable[[TemplateEvent], None]
#: ``on_event`` of the async client: a function, or a coroutine function.
AsyncOnTemplateEvent = Callable[[TemplateEvent], Awaitable[None] | None]


def template_path(name: str) -> str:
    """The API path of the template ``name``."""
    return "/v1/templates/" + quote(name, safe="")


def _not_found(msg: str) -> WithRuntimeError:
    return api_error(404, "not_found", msg)


def _bad(msg: str) -> WithRuntimeError:
    return api_error(400, "bad_request", msg)


def taken(name: str) -> WithRuntimeError:
    """The ConflictError for a name already taken, raised before an upload."""
    return api_error(
        409, "conflict", f"template {name!r} already exists; delete it first (delete_template) or pick another name"
    )


def local_image(image: ImageRef) -> tuple[str, str]:
    """Whether ``image`` names a file or directory on this machine, by the
    rules of the CLI and the server: (``"oci-layout"``, path),
    (``"docker-archive"``, path), (``"path"``, path) or (``""``, ``""``) for
    a registry reference."""
    if isinstance(image, os.PathLike):
        return "path", os.fspath(image)
    ref = image.strip()
    for prefix in ("oci-layout:", "docker-archive:"):
        if ref.startswith(prefix):
            return prefix[:-1], ref[len(prefix) :]
    if ref.startswith(("/", "./", "../")) or ref.endswith(".tar"):
        return "path", ref
    return "", ""


# -- tar streams ------------------------------------------------------------


def _header(info: tarfile.TarInfo) -> bytes:
    return info.tobuf(format=tarfile.PAX_FORMAT, encoding="utf-8", errors="surrogateescape")


def _pad(size: int) -> bytes:
    return b"\0" * (-size % _BLOCK)


def _file_entry(path: str, info: tarfile.TarInfo) -> Iterator[bytes]:
    """A regular file's header, its ``info.size`` bytes and padding."""
    with open(path, "rb") as f:
        yield _header(info)
        left = info.size
        while left > 0:
            chunk = f.read(min(_http.CHUNK_SIZE, left))
            if not chunk:
                raise WithRuntimeError(f"withruntime: {path} shrank while it was read")
            left -= len(chunk)
            yield chunk
    yield _pad(info.size)


def _bytes_entry(name: str, data: bytes) -> Iterator[bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    yield _header(info)
    yield data
    yield _pad(len(data))


def _end() -> bytes:
    return b"\0" * (2 * _BLOCK)


# -- OCI layouts --------------------------------------------------------------


def _read_json(path: Path, ref: str) -> Any:
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_LAYOUT_JSON + 1)
    except FileNotFoundError as e:
        raise _not_found(f"image {ref}: {e}") from e
    try:
        return json.loads(data)
    except ValueError as e:
        raise _bad(f"image {ref}: {path.name} is not valid JSON: {e}") from e


def _blob(layout: Path, ref: str, digest: Any) -> str:
    """The name of digest's blob in the layout, ``blobs/ALG/ENCODED``,
    checked to be a regular file."""
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise _bad(f"image {ref}: {digest!r} is not a digest")
    alg, enc = digest.split(":", 1)
    name = f"blobs/{alg}/{enc}"
    try:
        st = os.stat(layout / name)
    except FileNotFoundError as e:
        raise _not_found(f"image {ref}: blob {digest}: {e}") from e
    if not stat.S_ISREG(st.st_mode):
        raise _bad(f"image {ref}: blob {digest} is not a regular file")
    return name


def _pick_manifest(layout: Path, ref: str, index: Any, depth: int = 0) -> Mapping[str, Any]:
    if depth > 4:
        raise _bad(f"image {ref}: indexes nested too deep")
    manifests = index.get("manifests") if isinstance(index, Mapping) else None
    others: list[str] = []
    unlabelled: list[Mapping[str, Any]] = []
    for d in manifests or []:
        if not isinstance(d, Mapping):
            continue
        mt = d.get("mediaType")
        plat = d.get("platform") if isinstance(d.get("platform"), Mapping) else None
        if mt in _INDEX_TYPES:
            child = _read_json(layout / _blob(layout, ref, d.get("digest")), ref)
            try:
                return _pick_manifest(layout, ref, child, depth + 1)
            except WithRuntimeError as e:
                others.append(f"(a nested index: {e})")
        elif mt not in _MANIFEST_TYPES:
            continue
        elif plat is None:
            unlabelled.append(d)
        elif plat.get("os") == "linux" and plat.get("architecture") == "amd64":
            return d
        elif plat.get("os") != "unknown":  # "unknown": buildx attestations
            others.append(f"{plat.get('os')}/{plat.get('architecture')}")
    if len(unlabelled) == 1 and not others:
        return unlabelled[0]
    if others:
        raise _bad(
            f"image {ref} has no linux/amd64 variant (it has: {', '.join(others)}); "
            "Runtime runs linux/amd64 images only"
        )
    if not unlabelled:
        raise _bad(f"image {ref}: the layout's index holds no image")
    raise _bad(f"image {ref}: the layout's index holds {len(unlabelled)} images without a platform; keep one")


def oci_layout_archive(layout_dir: str, ref: str) -> Iterator[bytes]:
    """Checks the OCI image layout ``layout_dir`` and returns its linux/amd64
    image as a `docker save` tarball, a stream of byte chunks (the blobs
    are read as it is consumed, never whole)."""
    layout = Path(layout_dir)
    if not (layout / "oci-layout").exists():
        raise _bad(
            f"image {ref}: {layout_dir} has no oci-layout file, so it is not an OCI image layout "
            "(make one with `skopeo copy ... oci:DIR` or `crane pull --format=oci`)"
        )
    desc = _pick_manifest(layout, ref, _read_json(layout / "index.json", ref))
    manifest = _read_json(layout / _blob(layout, ref, desc.get("digest")), ref)
    if not isinstance(manifest, Mapping) or not isinstance(manifest.get("config"), Mapping):
        raise _bad(f"image {ref}: its manifest has no config")
    config = _blob(layout, ref, manifest["config"].get("digest"))
    layers = [
        _blob(layout, ref, ly.get("digest") if isinstance(ly, Mapping) else None) for ly in manifest.get("layers") or []
    ]
    if not layers:
        raise _bad(f"image {ref} has no layers")
    index = json.dumps([{"Config": config, "RepoTags": [], "Layers": layers}]).encode()

    def chunks() -> Iterator[bytes]:
        yield from _bytes_entry("manifest.json", index)
        for name in dict.fromkeys([config, *layers]):
            path = str(layout / name)
            info = tarfile.TarInfo(name)
            info.size, info.mode = os.stat(path).st_size, 0o644
            yield from _file_entry(path, info)
        yield _end()

    return chunks()


# -- build contexts ------------------------------------------------------------


class Dockerignore:
    """A ``.dockerignore``'s patterns, matched as Docker matches them: a path
    is excluded when the last pattern that matches it or one of its parent
    directories is not an exception (``!``). ``*`` matches within a path
    element, ``?`` one character of it, ``**`` any number of elements,
    ``[...]`` a class, and ``\\`` escapes."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.patterns: list[tuple[re.Pattern[str], bool]] = []
        for line in lines:
            if line.startswith("#"):
                continue
            p = line.strip()
            if not p:
                continue
            exception = p.startswith("!")
            if exception:
                p = p[1:].strip()
                if not p:
                    raise _bad(f".dockerignore: {line!r} is an exception without a pattern")
            p = posixpath.normpath(p.replace(os.sep, "/"))
            if p.startswith("/"):
                p = "/" + p.lstrip("/")
                if len(p) > 1:
                    p = p[1:]
            try:
                self.patterns.append((re.compile(_ignore_regexp(p)), exception))
            except re.error as e:
                raise _bad(f".dockerignore: bad pattern {line!r}: {e}") from e

    @classmethod
    def read(cls, context: str) -> Dockerignore | None:
        """The context directory's ``.dockerignore``; None if it has none."""
        try:
            with open(os.path.join(context, ".dockerignore"), encoding="utf-8-sig") as f:
                return cls(f.read().splitlines())
        except FileNotFoundError:
            return None

    @property
    def has_exceptions(self) -> bool:
        """Whether a pattern is an exception (``!``): excluded directories
        are then still searched."""
        return any(exc for _, exc in self.patterns)

    def excluded(self, rel: str) -> bool:
        """Whether the context path ``rel`` (``"a/b"``) is left out."""
        parent = posixpath.dirname(rel)
        parents = parent.split("/") if parent else []
        matched = False
        for rx, exception in self.patterns:
            if exception != matched:
                continue
            match = rx.fullmatch(rel) is not None
            for i in range(len(parents)):
                if match:
                    break
                match = rx.fullmatch("/".join(parents[: i + 1])) is not None
            if match:
                matched = not exception
        return matched


def _ignore_regexp(p: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(p):
        ch = p[i]
        if ch == "*" and i + 1 < len(p) and p[i + 1] == "*":
            i += 1
            if i + 1 < len(p) and p[i + 1] == "/":
                i += 1
            out.append(".*" if i + 1 == len(p) else "(.*/)?")
        elif ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch in ".+()|{}$":
            out.append("\\" + ch)
        elif ch == "\\":
            if i + 1 < len(p):
                i += 1
                out.append(re.escape(p[i]))
            else:
                out.append("\\\\")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _context_entries(
    context: str, ignore: Dockerignore | None, df_name: str
) -> Iterator[tuple[str, str, os.stat_result]]:
    """The context's (relative name, path, lstat) in lexical order, less
    what ``ignore`` excludes; a directory excluded with no exceptions in the
    file is not descended into."""

    def walk(dir_path: str, prefix: str) -> Iterator[tuple[str, str, os.stat_result]]:
        for name in sorted(os.listdir(dir_path)):
            rel = prefix + name
            path = os.path.join(dir_path, name)
            st = os.lstat(path)
            if rel == CONTEXT_DOCKERFILE:
                continue  # the place of a Dockerfile from elsewhere
            is_dir = stat.S_ISDIR(st.st_mode)
            if rel != df_name and ignore is not None and ignore.excluded(rel):
                if is_dir and ignore.has_exceptions:
                    yield from walk(path, rel + "/")
                continue
            yield rel, path, st
            if is_dir:
                yield from walk(path, rel + "/")

    return walk(context, "")


def context_archive(context: str, ignore: Dockerignore | None, df_name: str, dockerfile: bytes) -> Iterator[bytes]:
    """The build context as a tar stream: its regular files, directories and
    symlinks with their modes, without owners, less what ``ignore``
    excludes, and the Dockerfile as ``df_name`` unless it is among them."""
    saw = False
    for rel, path, st in _context_entries(context, ignore, df_name):
        info = tarfile.TarInfo(rel)
        info.mode, info.mtime = stat.S_IMODE(st.st_mode), int(st.st_mtime)
        if stat.S_ISDIR(st.st_mode):
            info.type, info.name = tarfile.DIRTYPE, rel + "/"
            yield _header(info)
        elif stat.S_ISLNK(st.st_mode):
            info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
            yield _header(info)
        elif stat.S_ISREG(st.st_mode):
            info.size = st.st_size
            saw = saw or rel == df_name
            yield from _file_entry(path, info)
        # devices, sockets and FIFOs are left out
    if not saw:
        yield from _bytes_entry(df_name, dockerfile)
    yield _end()


@dataclass
class BuildRequest:
    """A Dockerfile build, checked and ready to send."""

    params: list[tuple[str, str]]
    body: Iterator[bytes]


def build_request(
    name: str,
    context: str | os.PathLike[str],
    *,
    dockerfile: str | os.PathLike[str] | None,
    dockerfile_content: str | None,
    build_args: Mapping[str, str] | None,
    internet: bool,
    allow: Sequence[str] | None,
) -> BuildRequest:
    """The query and body of a Dockerfile build (see Client.build_template)."""
    ctx = os.fspath(context)
    if not os.path.isdir(ctx):
        raise _not_found(f"build context {ctx}: not a directory")
    if isinstance(allow, str):
        raise TypeError('allow: give a list of hosts, such as allow=["pypi.mirror.example"]')
    df_name = CONTEXT_DOCKERFILE
    if dockerfile_content is not None:
        df = dockerfile_content.encode("utf-8")
    else:
        df_path = os.fspath(dockerfile) if dockerfile is not None else os.path.join(ctx, "Dockerfile")
        try:
            with open(df_path, "rb") as f:
                df = f.read()
        except OSError as e:
            raise _not_found(f"Dockerfile: {e}") from e
        rel = os.path.relpath(os.path.abspath(df_path), os.path.abspath(ctx))
        if rel != os.curdir and rel != os.pardir and not rel.startswith(os.pardir + os.sep):
            df_name = rel.replace(os.sep, "/")
    ignore = Dockerignore.read(ctx)
    params: list[tuple[str, str]] = [("name", name), ("dockerfile", df_name)]
    for k in sorted(build_args or {}):
        params.append(("buildArg", f"{k}={build_args[k]}"))  # type: ignore[index]
    if internet:
        params.append(("internet", "true"))
    params += [("allow", h) for h in allow or []]
    return BuildRequest(params, context_archive(ctx, ignore, df_name, df))


def upload_params(name: str, label: str | None) -> list[tuple[str, str]]:
    """The query of a tarball upload; the label is cut to MAX_LABEL_BYTES."""
    q = [("name", name)]
    if label:
        q.append(("image", label.encode("utf-8")[:MAX_LABEL_BYTES].decode("utf-8", "ignore")))
    return q


def end_event(ev: TemplateEvent) -> Template | None:
    """For a template event its template; for an error event raises its
    APIError; None for progress events."""
    if ev.type == "template":
        if ev.template is None:
            raise WithRuntimeError("withruntime: template event without a template")
        return ev.template
    if ev.type == "error":
        e = ev.error or ErrorInfo("internal", "the template build failed without a message")
        raise api_error(status_of_code(e.code), e.code, e.message)
    return None


def event_from_line(line: str) -> TemplateEvent | None:
    """One NDJSON line of a build's progress as an event; None for a blank line."""
    line = line.strip()
    if not line:
        return None
    try:
        d = json.loads(line)
    except ValueError as e:
        raise WithRuntimeError(f"withruntime: bad event in the template build's progress: {e}") from e
    if not isinstance(d, dict):
        raise WithRuntimeError("withruntime: bad event in the template build's progress: not a JSON object")
    return TemplateEvent.from_dict(d)


_ENDED = "withruntime: the template build's progress ended without a result"


async def _async_chunks(it: Iterator[bytes]) -> AsyncIterator[bytes]:
    """Reads a sync chunk stream (files on disk) in a worker thread."""
    while True:
        chunk = await asyncio.to_thread(next, it, None)
        if chunk is None:
            return
        yield chunk


class TemplatesMixin:
    """The template methods of :class:`~withruntime.Client`."""

    if TYPE_CHECKING:

        def _send(
            self,
            method: str,
            path: str,
            *,
            params: Any = None,
            json_body: Any = None,
            content: Any = None,
            content_type: str | None = None,
            accept: str = _http.JSON,
            extra_headers: Mapping[str, str] | None = None,
            stream: bool = False,
        ) -> httpx.Response: ...

        def _json(self, method: str, path: str, body: Any = None, *, params: Any = None) -> Any: ...

    def list_templates(self) -> builtins.list[Template]:
        """The server's templates by name. Raises UnauthorizedError."""
        out = self._json("GET", "/v1/templates")
        return [Template.from_dict(d) for d in out.get("templates") or []]

    def get_template(self, name: str) -> Template:
        """The template ``name``. Raises NotFoundError, BadRequestError (an
        invalid name)."""
        return Template.from_dict(self._json("GET", template_path(name)))

    def delete_template(self, name: str) -> None:
        """Deletes the template ``name`` and its files (admin keys). Raises
        NotFoundError, ConflictError (sandboxes that are starting or running
        use it, or the warm pool serves it; the message names them),
        ForbiddenError."""
        self._send("DELETE", template_path(name))

    def create_template(self, name: str, image: ImageRef, *, on_event: OnTemplateEvent | None = None) -> Template:
        """Makes the new template ``name`` from a linux/amd64 container
        image (admin keys) and returns it once it is ready. ``image`` is, as
        for ``withruntime template build --from-image``:

        - a registry image, ``[HOST[:PORT]/]REPO[:TAG|@sha256:DIGEST]``,
          pulled by the server with the registry credentials of the user it
          runs as;
        - ``"oci-layout:DIR"``, or a directory path (a ``os.PathLike``, or a
          str starting with ``/``, ``./`` or ``../``): an OCI image layout on
          this machine, which the SDK reads and uploads as a `docker save`
          tarball;
        - ``"docker-archive:FILE"``, or a file path (a ``os.PathLike``, or a
          str starting with ``/``, ``./`` or ``../`` or ending in ``.tar``):
          a `docker save` tarball on this machine, uploaded as it is.

        ``name`` is 1-63 of a-z, 0-9, ``.``, ``_``, ``-``, starting with a
        letter or digit. ``on_event`` is called with each step event as the
        server pulls (or receives) and flattens the layers. The template's
        sandboxes run commands as ``user`` (uid 1000) in /workspace, with
        bash (or /bin/sh when the image has none), and start with the
        image's environment. Errors: see the module's documentation.
        """
        kind, path = local_image(image)
        if not kind:
            return self._template_build("/v1/templates", on_event, json_body={"name": name, "fromImage": image})
        if not os.path.exists(path):
            raise _not_found(f"image {image}: no such file or directory: {path}")
        label = os.fspath(image)
        self._check_free(name)
        if kind == "oci-layout" or (kind == "path" and os.path.isdir(path)):
            if not os.path.isdir(path):
                raise _bad(
                    f"image {image}: {path} is not a directory; an OCI layout is a directory with an oci-layout file"
                )
            return self._upload(name, label, oci_layout_archive(path, label), on_event)
        if not os.path.isfile(path):
            raise _bad(f"image {image}: {path} is not a regular file; give a `docker save` tarball")
        with open(path, "rb") as f:
            return self._upload(name, label, f, on_event)

    def upload_template(
        self,
        name: str,
        tarball: _http.UploadSource,
        *,
        label: str | None = None,
        on_event: OnTemplateEvent | None = None,
    ) -> Template:
        """Makes the new template ``name`` from a `docker save` tarball
        (bytes, a binary file object, or an iterable of byte chunks),
        streamed to the server. ``label`` is recorded as its origin (at most
        1024 bytes; default ``"upload"``). See :meth:`create_template`."""
        self._check_free(name)
        return self._upload(name, label, tarball, on_event)

    def build_template(
        self,
        name: str,
        context: str | os.PathLike[str] = ".",
        *,
        dockerfile: str | os.PathLike[str] | None = None,
        dockerfile_content: str | None = None,
        build_args: Mapping[str, str] | None = None,
        internet: bool = False,
        allow: Sequence[str] | None = None,
        on_event: OnTemplateEvent | None = None,
    ) -> Template:
        """Builds the new template ``name`` from a Dockerfile (admin keys),
        as ``withruntime template build NAME -f Dockerfile CONTEXT`` does.

        The build context directory ``context`` is sent less what its
        ``.dockerignore`` excludes (Docker's syntax): regular files,
        directories and symlinks, with their modes and without owners. The
        Dockerfile is ``dockerfile`` (a path on this machine, default
        ``CONTEXT/Dockerfile``; it may lie outside the context) or the text
        ``dockerfile_content``. It may use ``FROM`` (a template of the
        server, or a registry image), ``RUN``, ``ENV``, ``WORKDIR``,
        ``USER``, ``COPY`` and ``ADD`` (files of the context) and ``ARG``
        (values from ``build_args``); anything else is refused by name
        before anything runs. The steps run in a sandbox on the server with
        no network, unless ``internet=True`` or ``allow`` lists the hosts
        (or CIDRs) they may reach, such as a package index.

        ``on_event`` is called with each step event (each layer and
        instruction) and each output event (what ``RUN`` prints) as they
        happen. A failing ``RUN`` raises BadRequestError with its exit code
        and last output. Errors: see the module's documentation.
        """
        req = build_request(
            name,
            context,
            dockerfile=dockerfile,
            dockerfile_content=dockerfile_content,
            build_args=build_args,
            internet=internet,
            allow=allow,
        )
        self._check_free(name)
        return self._template_build(
            "/v1/templates", on_event, params=req.params, content=req.body, content_type="application/x-tar"
        )

    def _check_free(self, name: str) -> None:
        """Refuses a taken name before a body is sent."""
        from .errors import NotFoundError

        try:
            self.get_template(name)
        except NotFoundError:
            return
        raise taken(name)

    def _upload(self, name: str, label: str | None, src: Any, on_event: OnTemplateEvent | None) -> Template:
        content, hdrs = _http.upload_content(src)
        return self._template_build(
            "/v1/templates",
            on_event,
            params=upload_params(name, label),
            content=content,
            content_type="application/x-tar",
            extra_headers=hdrs,
        )

    def _template_build(self, path: str, on_event: OnTemplateEvent | None, **kw: Any) -> Template:
        import httpx

        from .errors import TransportError

        resp = self._send("POST", path, accept=_http.NDJSON, stream=True, **kw)
        try:
            if not resp.headers.get("Content-Type", "").startswith(_http.NDJSON):
                return Template.from_dict(json.loads(resp.read()))
            for line in resp.iter_lines():
                ev = event_from_line(line)
                if ev is None:
                    continue
                t = end_event(ev)
                if t is not None:
                    return t
                if on_event is not None:
                    on_event(ev)
        except httpx.HTTPError as e:
            raise TransportError(f"withruntime: the template build's progress broke: {e}") from e
        finally:
            resp.close()
        raise WithRuntimeError(_ENDED)


class AsyncTemplatesMixin:
    """The template methods of :class:`~withruntime.AsyncClient`: those of
    :class:`TemplatesMixin`, awaited. ``on_event`` may be a coroutine
    function. Local files are read in worker threads."""

    if TYPE_CHECKING:

        async def _send(
            self,
            method: str,
            path: str,
            *,
            params: Any = None,
            json_body: Any = None,
            content: Any = None,
            content_type: str | None = None,
            accept: str = _http.JSON,
            extra_headers: Mapping[str, str] | None = None,
            stream: bool = False,
        ) -> httpx.Response: ...

        async def _json(self, method: str, path: str, body: Any = None, *, params: Any = None) -> Any: ...

    async def list_templates(self) -> builtins.list[Template]:
        """The server's templates by name (see Client.list_templates)."""
        out = await self._json("GET", "/v1/templates")
        return [Template.from_dict(d) for d in out.get("templates") or []]

    async def get_template(self, name: str) -> Template:
        """The template ``name`` (see Client.get_template)."""
        return Template.from_dict(await self._json("GET", template_path(name)))

    async def delete_template(self, name: str) -> None:
        """Deletes the template ``name`` (see Client.delete_template)."""
        await self._send("DELETE", template_path(name))

    async def create_template(
        self, name: str, image: ImageRef, *, on_event: AsyncOnTemplateEvent | None = None
    ) -> Template:
        """Makes the new template ``name`` from a container image (see
        Client.create_template)."""
        kind, path = local_image(image)
        if not kind:
            return await self._template_build("/v1/templates", on_event, json_body={"name": name, "fromImage": image})
        if not os.path.exists(path):
            raise _not_found(f"image {image}: no such file or directory: {path}")
        label = os.fspath(image)
        await self._check_free(name)
        if kind == "oci-layout" or (kind == "path" and os.path.isdir(path)):
            if not os.path.isdir(path):
                raise _bad(
                    f"image {image}: {path} is not a directory; an OCI layout is a directory with an oci-layout file"
                )
            chunks = await asyncio.to_thread(oci_layout_archive, path, label)
            return await self._upload(name, label, _async_chunks(chunks), on_event)
        if not os.path.isfile(path):
            raise _bad(f"image {image}: {path} is not a regular file; give a `docker save` tarball")
        with open(path, "rb") as f:
            return await self._upload(name, label, _async_chunks(iter(lambda: f.read(_http.CHUNK_SIZE), b"")), on_event)

    async def upload_template(
        self,
        name: str,
        tarball: _http.AsyncUploadSource,
        *,
        label: str | None = None,
        on_event: AsyncOnTemplateEvent | None = None,
    ) -> Template:
        """Makes the new template ``name`` from a `docker save` tarball (see
        Client.upload_template; an async iterable of chunks works too)."""
        await self._check_free(name)
        return await self._upload(name, label, tarball, on_event)

    async def build_template(
        self,
        name: str,
        context: str | os.PathLike[str] = ".",
        *,
        dockerfile: str | os.PathLike[str] | None = None,
        dockerfile_content: str | None = None,
        build_args: Mapping[str, str] | None = None,
        internet: bool = False,
        allow: Sequence[str] | None = None,
        on_event: AsyncOnTemplateEvent | None = None,
    ) -> Template:
        """Builds the new template ``name`` from a Dockerfile and its build
        context (see Client.build_template)."""
        req = await asyncio.to_thread(
            build_request,
            name,
            context,
            dockerfile=dockerfile,
            dockerfile_content=dockerfile_content,
            build_args=build_args,
            internet=internet,
            allow=allow,
        )
        await self._check_free(name)
        return await self._template_build(
            "/v1/templates",
            on_event,
            params=req.params,
            content=_async_chunks(req.body),
            content_type="application/x-tar",
        )

    async def _check_free(self, name: str) -> None:
        from .errors import NotFoundError

        try:
            await self.get_template(name)
        except NotFoundError:
            return
        raise taken(name)

    async def _upload(self, name: str, label: str | None, src: Any, on_event: AsyncOnTemplateEvent | None) -> Template:
        content, hdrs = _http.upload_content(src, is_async=True)
        return await self._template_build(
            "/v1/templates",
            on_event,
            params=upload_params(name, label),
            content=content,
            content_type="application/x-tar",
            extra_headers=hdrs,
        )

    async def _template_build(self, path: str, on_event: AsyncOnTemplateEvent | None, **kw: Any) -> Template:
        import httpx

        from .errors import TransportError

        resp = await self._send("POST", path, accept=_http.NDJSON, stream=True, **kw)
        try:
            if not resp.headers.get("Content-Type", "").startswith(_http.NDJSON):
                return Template.from_dict(json.loads(await resp.aread()))
            async for line in resp.aiter_lines():
                ev = event_from_line(line)
                if ev is None:
                    continue
                t = end_event(ev)
                if t is not None:
                    return t
                if on_event is not None:
                    r = on_event(ev)
                    if inspect.isawaitable(r):
                        await r
        except httpx.HTTPError as e:
            raise TransportError(f"withruntime: the template build's progress broke: {e}") from e
        finally:
            await resp.aclose()
        raise WithRuntimeError(_ENDED)
