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

import json
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from .errors import WithRuntimeError, api_error, status_of_code
from .types import ErrorInfo, parse_time

__all__ = [
    "Template",
    "TemplateOrigin",
    "TemplateStart",
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
class TemplateStart:
    """What a warm template's sandboxes run before they are handed out: the
    server starts ``command`` in the background (and with ``kernel`` the
    default code context's kernel), runs ``ready_command`` until it exits
    0, and saves the sandbox; every create starts from that save, so the
    first command finds the server answering."""

    #: A shell command line started in the background as the sandbox user
    #: in /workspace (a Dockerfile's ``CMD``), or ``""``.
    command: str = ""
    #: A shell command line run until it exits 0, or ``""``: ready as soon
    #: as ``command`` started.
    ready_command: str = ""
    #: Seconds ``ready_command`` may take to pass (0: 60).
    ready_timeout_seconds: int = 0
    #: The default code context's kernel is started with the usual imports.
    kernel: bool = False

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TemplateStart:
        return cls(
            command=d.get("command", "") or "",
            ready_command=d.get("readyCommand", "") or "",
            ready_timeout_seconds=int(d.get("readyTimeoutSeconds", 0) or 0),
            kernel=bool(d.get("kernel", False)),
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
    #: True when the template is the key's that made it: no other key sees,
    #: boots, builds from or deletes it; False when every key shares it.
    private: bool = False
    #: For a warm template, what its sandboxes run before they are handed
    #: out (``code-interpreter``'s: its kernel); None otherwise.
    start: TemplateStart | None = None
    _raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Template:
        o = d.get("origin")
        st = d.get("start")
        return cls(
            name=d.get("name", ""),
            created_at=parse_time(d.get("createdAt")),
            size_bytes=int(d.get("sizeBytes", 0) or 0),
            origin=TemplateOrigin.from_dict(o) if isinstance(o, Mapping) else None,
            private=bool(d.get("private", False)),
            start=TemplateStart.from_dict(st) if isinstance(st, Mapping) else None,
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


def start_dict(start: TemplateStart | None) -> dict[str, Any]:
    """A template's start as CreateTemplateRequest.start ({} for None)."""
    if start is None:
        return {}
    d: dict[str, Any] = {}
    if start.command:
        d["command"] = start.command
    if start.ready_command:
        d["readyCommand"] = start.ready_command
    if start.ready_timeout_seconds:
        d["readyTimeoutSeconds"] = start.ready_timeout_seconds
    if start.kernel:
        d["kernel"] = True
    return d


def start_params(start: TemplateStart | None) -> list[tuple[str, str]]:
    """A template's start as a tar body's query (startCommand,
    readyCommand, readyTimeoutSeconds, startKernel)."""
    names = {"command": "startCommand", "readyCommand": "readyCommand",
             "readyTimeoutSeconds": "readyTimeoutSeconds", "kernel": "startKernel"}
    return [(names[k], "true" if v is True else str(v)) for k, v in start_dict(start).items()]


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


#: The error of a build whose progress ended without a result.
ENDED = "withruntime: the template build's progress ended without a result"
