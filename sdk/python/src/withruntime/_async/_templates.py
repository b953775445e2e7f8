"""The template methods of :class:`~withruntime.Client` and
:class:`~withruntime.AsyncClient` (a mixin; the types and the rest of the
story are in :mod:`withruntime.templates`). ``_sync/_templates.py`` is
generated from ``_async/_templates.py`` (see _client.py); the async one's ``on_event`` may be
a coroutine function, and it reads local files in worker threads."""

from __future__ import annotations

import builtins
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .. import _http, _wait
from .. import _io_async as _io
from .._archive import bad, build_request, not_found, oci_layout_archive
from ..errors import NotFoundError, WithRuntimeError
from ..templates import (
    ENDED,
    AsyncOnTemplateEvent,
    ImageRef,
    Template,
    TemplateStart,
    end_event,
    event_from_line,
    local_image,
    taken,
    template_path,
    start_dict,
    start_params,
    upload_params,
)
from ._base import AsyncTransport

__all__ = ["AsyncTemplatesMixin"]


class AsyncTemplatesMixin(AsyncTransport):
    """The template methods of :class:`~withruntime.Client` (awaited in
    :class:`~withruntime.AsyncClient`)."""

    async def list_templates(self) -> builtins.list[Template]:
        """The server's templates by name. Raises UnauthorizedError."""
        out = await self._json("GET", "/v1/templates")
        return [Template.from_dict(d) for d in out.get("templates") or []]

    async def get_template(self, name: str) -> Template:
        """The template ``name``. Raises NotFoundError, BadRequestError (an
        invalid name)."""
        return Template.from_dict(await self._json("GET", template_path(name)))

    async def delete_template(self, name: str) -> None:
        """Deletes the template ``name`` and its files (admin keys). Raises
        NotFoundError, ConflictError (sandboxes that are starting or running
        use it, or the warm pool serves it; the message names them),
        ForbiddenError."""
        await self._send("DELETE", template_path(name))

    async def create_template(
        self,
        name: str,
        image: ImageRef,
        *,
        on_event: AsyncOnTemplateEvent | None = None,
        start: TemplateStart | None = None,
    ) -> Template:
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
        image's environment. ``start`` makes the template warm
        (:class:`~withruntime.TemplateStart`: the build starts its command,
        waits for its ready check, which must pass, and saves the sandbox;
        every create starts from that save). Errors: see the module's
        documentation.
        """
        kind, path = local_image(image)
        if not kind:
            body: dict[str, Any] = {"name": name, "fromImage": image}
            if start is not None:
                body["start"] = start_dict(start)
            return await self._template_build("/v1/templates", on_event, json_body=body)
        if not os.path.exists(path):
            raise not_found(f"image {image}: no such file or directory: {path}")
        label = os.fspath(image)
        await self._check_free(name)
        if kind == "oci-layout" or (kind == "path" and os.path.isdir(path)):
            if not os.path.isdir(path):
                raise bad(
                    f"image {image}: {path} is not a directory; an OCI layout is a directory with an oci-layout file"
                )
            chunks = await _io.in_thread(oci_layout_archive, path, label)
            return await self._upload(name, label, _io.thread_chunks(chunks), on_event, start)
        if not os.path.isfile(path):
            raise bad(f"image {image}: {path} is not a regular file; give a `docker save` tarball")
        with open(path, "rb") as f:
            return await self._upload(name, label, _io.file_source(f), on_event, start)

    async def upload_template(
        self,
        name: str,
        tarball: _http.AsyncUploadSource,
        *,
        label: str | None = None,
        on_event: AsyncOnTemplateEvent | None = None,
        start: TemplateStart | None = None,
    ) -> Template:
        """Makes the new template ``name`` from a `docker save` tarball
        (bytes, a binary file object, or an iterable of byte chunks),
        streamed to the server. ``label`` is recorded as its origin (at most
        1024 bytes; default ``"upload"``). See :meth:`create_template`."""
        await self._check_free(name)
        return await self._upload(name, label, tarball, on_event, start)

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
        start: TemplateStart | None = None,
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
        and last output. The Dockerfile's ``CMD`` is the template's start
        command; ``start`` adds a ready check (or replaces the command), as
        in :meth:`create_template`. Errors: see the module's documentation.
        """
        req = await _io.in_thread(
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
            params=req.params + start_params(start),
            content=_io.thread_chunks(req.body),
            content_type="application/x-tar",
        )

    async def _check_free(self, name: str) -> None:
        """Refuses a taken name before a body is sent."""
        try:
            await self.get_template(name)
        except NotFoundError:
            return
        raise taken(name)

    async def _upload(
        self,
        name: str,
        label: str | None,
        src: Any,
        on_event: AsyncOnTemplateEvent | None,
        start: TemplateStart | None = None,
    ) -> Template:
        content, hdrs = _io.upload_content(src)
        return await self._template_build(
            "/v1/templates",
            on_event,
            params=upload_params(name, label) + start_params(start),
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
                    await _io.resolve(on_event(ev))
        except httpx.HTTPError as e:
            raise _wait.read_error(None, resp, e, "the template build's progress broke") from e
        finally:
            await resp.aclose()
        raise WithRuntimeError(ENDED)
