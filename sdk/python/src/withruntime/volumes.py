"""Volumes: storage that outlives sandboxes (``api/openapi.yaml``, tag
volumes).

A volume belongs to the key that made it and is named among its volumes
(another key's is never found). A create mounts it::

    client.create_volume("cache", size_mib=1024)
    with Sandbox.create(volumes=[VolumeMount("cache", "/cache")]) as a:
        a.exec("pip download -d /cache requests")
    with Sandbox.create(volumes=[{"name": "cache", "path": "/cache", "readOnly": True}]) as b:
        b.exec("ls /cache")                     # what a wrote, after a is gone

Several sandboxes may mount one volume at once, read-write or read-only
(writes to a read-only mount fail inside with EROFS); they share its files as
two processes on one machine do. Its size is a hard quota (a write past it
fails inside with ENOSPC, ``NoSpaceError`` through the file API), counted in
the key's disk quota and billed at the storage price until it is deleted.

Its files can be read and written without a sandbox
(:meth:`Client.volume_files`), with the sandbox file API's path rules and the
volume's root as ``/``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal
from urllib.parse import quote

from .types import VolumeMount, parse_time

__all__ = ["VolumeInfo", "VolumeMount", "MIN_VOLUME_MIB", "MAX_VOLUME_MOUNTS"]

#: The smallest volume, in MiB.
MIN_VOLUME_MIB = 16
#: The most volumes one sandbox mounts.
MAX_VOLUME_MOUNTS = 8


@dataclass(frozen=True)
class VolumeInfo:
    """A volume as the server describes it."""

    #: Its name among the key's volumes.
    name: str
    #: Its id (``"vol_"`` and 16 characters), under which its storage
    #: appears in usage reports.
    id: str
    #: Its size in MiB: a hard quota on its files, counted in the key's disk
    #: quota and billed at the storage price.
    size_mib: int
    #: What its files take, in bytes.
    used_bytes: int
    #: What its files may take in all, in bytes (its size less its
    #: filesystem's journal and inode tables).
    capacity_bytes: int
    #: ``"ready"`` to mount; ``"creating"`` and ``"deleting"`` while a
    #: create or delete runs; ``"damaged"`` when its filesystem failed its
    #: check after a host crash (not mounted; ``error`` says why).
    state: Literal["creating", "ready", "deleting", "damaged"] | str
    #: When it was made (UTC).
    created_at: datetime | None
    #: The sandboxes that are not stopped (starting, running or paused) and
    #: mount it, by id; a delete is refused while any does.
    mounted_by: list[str] = field(default_factory=list)
    #: What is wrong with a damaged volume, else ``""``.
    error: str = ""
    _raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VolumeInfo:
        return cls(
            name=d.get("name", ""),
            id=d.get("id", ""),
            size_mib=int(d.get("sizeMiB", 0) or 0),
            used_bytes=int(d.get("usedBytes", 0) or 0),
            capacity_bytes=int(d.get("capacityBytes", 0) or 0),
            state=d.get("state", ""),
            created_at=parse_time(d.get("createdAt")),
            mounted_by=[str(s) for s in d.get("mountedBy") or []],
            error=d.get("error", "") or "",
            _raw=dict(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The volume as the server sent it (camelCase keys)."""
        return dict(self._raw)


#: A mount as ``Sandbox.create(volumes=...)`` takes it: a VolumeMount, or its
#: dict (``{"name", "path", "readOnly"}``; ``read_only`` is read too).
VolumeMountArg = VolumeMount | Mapping[str, Any]


def volume_path(name: str, suffix: str = "") -> str:
    """The API path of the key's volume ``name``."""
    return "/v1/volumes/" + quote(name, safe="") + suffix


def create_body(name: str, size_mib: int) -> dict[str, Any]:
    """The body of POST /v1/volumes."""
    if isinstance(size_mib, bool) or not isinstance(size_mib, int):
        raise TypeError(
            f"size_mib: give the volume's size in MiB as an int (at least {MIN_VOLUME_MIB}), not {size_mib!r}"
        )
    return {"name": name, "sizeMiB": size_mib}


def mounts_body(volumes: Sequence[VolumeMountArg]) -> list[dict[str, Any]]:
    """The ``volumes`` of a create's body."""
    if isinstance(volumes, (str, Mapping, VolumeMount)):
        raise TypeError('volumes: give a list of mounts, such as volumes=[VolumeMount("cache", "/cache")]')
    out: list[dict[str, Any]] = []
    for v in volumes:
        name: Any
        path: Any
        if isinstance(v, VolumeMount):
            name, path, ro = v.name, v.path, v.read_only
        elif isinstance(v, Mapping):
            name, path = v.get("name"), v.get("path")
            ro = bool(v.get("readOnly", v.get("read_only", False)))
        else:
            raise TypeError(
                f"volumes: {v!r} is not a mount; give VolumeMount(name, path) or {{'name': ..., 'path': ...}}"
            )
        if not isinstance(name, str) or not name or not isinstance(path, str) or not path:
            raise TypeError(f"volumes: {v!r} needs a volume name and an absolute path inside the sandbox")
        m: dict[str, Any] = {"name": name, "path": path}
        if ro:
            m["readOnly"] = True
        out.append(m)
    return out
