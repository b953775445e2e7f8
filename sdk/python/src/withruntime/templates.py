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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from . import _http, _wait
from ._archive import bad, build_request, not_found, oci_layout_archive
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

#: The longest upload label the server takes, in bytes.
MAX_LABEL_BYTES = 1024


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
    """One NDJSON line of a build's progress as an event; None for a blank
    line and a heartbeat (the server's sign of life during a quiet step)."""
    line = line.strip()
    if not line:
        return None
    try:
        d = json.loads(line)
    except ValueError as e:
        raise WithRuntimeError(f"withruntime: bad event in the template build's progress: {e}") from e
    if not isinstance(d, dict):
        raise WithRuntimeError("withruntime: bad event in the template build's progress: not a JSON object")
    if d.get("type") == "heartbeat":
        return None
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
            wait: float = 0.0,
        ) -> httpx.Response: ...

        def _json(self, method: str, path: str, body: Any = None, *, params: Any = None, wait: float = 0.0) -> Any: ...

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
            raise not_found(f"image {image}: no such file or directory: {path}")
        label = os.fspath(image)
        self._check_free(name)
        if kind == "oci-layout" or (kind == "path" and os.path.isdir(path)):
            if not os.path.isdir(path):
                raise bad(
                    f"image {image}: {path} is not a directory; an OCI layout is a directory with an oci-layout file"
                )
            return self._upload(name, label, oci_layout_archive(path, label), on_event)
        if not os.path.isfile(path):
            raise bad(f"image {image}: {path} is not a regular file; give a `docker save` tarball")
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

        resp = self._send("POST", path, accept=_http.NDJSON, stream=True, wait=_wait.BUILD_WAIT, **kw)
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
            raise _wait.read_error(None, resp, e, "the template build's progress broke") from e
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
            wait: float = 0.0,
        ) -> httpx.Response: ...

        async def _json(
            self, method: str, path: str, body: Any = None, *, params: Any = None, wait: float = 0.0
        ) -> Any: ...

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
            raise not_found(f"image {image}: no such file or directory: {path}")
        label = os.fspath(image)
        await self._check_free(name)
        if kind == "oci-layout" or (kind == "path" and os.path.isdir(path)):
            if not os.path.isdir(path):
                raise bad(
                    f"image {image}: {path} is not a directory; an OCI layout is a directory with an oci-layout file"
                )
            chunks = await asyncio.to_thread(oci_layout_archive, path, label)
            return await self._upload(name, label, _async_chunks(chunks), on_event)
        if not os.path.isfile(path):
            raise bad(f"image {image}: {path} is not a regular file; give a `docker save` tarball")
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

        resp = await self._send("POST", path, accept=_http.NDJSON, stream=True, wait=_wait.BUILD_WAIT, **kw)
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
            raise _wait.read_error(None, resp, e, "the template build's progress broke") from e
        finally:
            await resp.aclose()
        raise WithRuntimeError(_ENDED)
