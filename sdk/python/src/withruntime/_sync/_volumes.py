# GENERATED from withruntime/_async/_volumes.py by sdk/python/scripts/generate.sh (unasync); do not edit.
# Change the async source and run sdk/python/scripts/generate.sh to regenerate.
"""Volumes: the volume methods of :class:`~withruntime.Client` (a mixin, so
that _client.py stays about sandboxes) and :class:`~withruntime.VolumeFiles`,
a volume's files without a sandbox. ``_sync/_volumes.py`` is generated from
``_async/_volumes.py`` (see _client.py). What a volume is, and its types, are
in :mod:`withruntime.volumes`."""

from __future__ import annotations

import builtins
from collections.abc import Iterator

from ..types import FileInfo, FileListPage
from ..volumes import VolumeInfo, create_body, volume_path
from ._base import Transport
from ._files import FileTransfer

__all__ = ["VolumesMixin", "VolumeFiles"]


class VolumesMixin(Transport):
    """The volume methods of :class:`~withruntime.Client` (awaited in
    :class:`~withruntime.AsyncClient`). Every key, an administrator's too,
    sees only its own volumes: another key's is not found."""

    def create_volume(self, name: str, size_mib: int) -> VolumeInfo:
        """Makes the key's empty volume ``name`` (1 to 63 letters, digits,
        ``.``, ``_``, ``-``, starting with a letter or digit) of ``size_mib``
        MiB (at least 16; at most the server's largest disk), a hard quota
        on its files, and returns it, ready to mount
        (``Sandbox.create(volumes=[VolumeMount(name, "/data")])``).

        Raises BadRequestError (a bad name or size), ConflictError (the key
        has a volume of that name), NoSpaceError (the key's disk quota or
        the host's disk; the message says which), UnsupportedError (the
        server's driver keeps no volumes: Kubernetes), UnauthorizedError."""
        return VolumeInfo.from_dict(self._json("POST", "/v1/volumes", create_body(name, size_mib)))

    def volumes(self) -> builtins.list[VolumeInfo]:
        """The key's volumes by name, with the bytes their files take and
        the sandboxes that mount them."""
        out = self._json("GET", "/v1/volumes")
        return [VolumeInfo.from_dict(d) for d in out.get("volumes") or []]

    def get_volume(self, name: str) -> VolumeInfo:
        """The key's volume ``name``. Raises NotFoundError (none, or
        another key's)."""
        return VolumeInfo.from_dict(self._json("GET", volume_path(name)))

    def delete_volume(self, name: str) -> None:
        """Deletes the key's volume ``name`` and its files, for good. Raises
        ConflictError while a sandbox that is not stopped (a paused one
        too) mounts it (the message names them), NotFoundError."""
        self._send("DELETE", volume_path(name))

    def volume_files(self, name: str) -> VolumeFiles:
        """The files of the key's volume ``name``, without a sandbox (see
        :class:`VolumeFiles`). Nothing is asked of the server until a call."""
        return VolumeFiles(self, name)


class _VolumeHandle:
    """What the file transfer needs of a volume: the client and the
    volume's API path (its routes are a sandbox's: ``.../files``,
    ``.../files/list``)."""

    def __init__(self, client: Transport, name: str) -> None:
        self._c = client
        self._name = name

    @property
    def _client(self) -> Transport:
        return self._c

    def _path(self, suffix: str = "") -> str:
        return volume_path(self._name, suffix)


class VolumeFiles(FileTransfer):
    """The files of one volume, without a sandbox
    (``client.volume_files(name)``): download (:meth:`open`, :meth:`read`,
    :meth:`read_file`, :meth:`read_text`), upload (:meth:`write`,
    :meth:`write_file`, :meth:`write_text`) and list (:meth:`list`,
    :meth:`list_page`, :meth:`entries`; one directory, depth 1).

    Paths are the volume's: absolute from its root (``/``), or relative to
    it, with the sandbox file API's rules (names of at most 255 bytes, paths
    of at most 4095, no NUL). No path leaves the volume: a symbolic link on
    the way that leads out of it (a sandbox may have left one) is refused
    with BadRequestError on a download, and replaced, never written through,
    by an upload. An upload is written beside the target and renamed over
    it; new files are 0644 and new directories made for them are owned by
    the sandbox user, as files a sandbox writes are. Sandboxes that mount
    the volume see an upload at once.

    Raises NotFoundError (no such volume of this key, or no such file),
    BadRequestError (a directory where a file is wanted, or the reverse; a
    path that leaves the volume), ConflictError (the volume is being created
    or deleted, or is damaged), TooLargeError (over the server's upload
    cap), NoSpaceError (the volume is full: nothing was written),
    RangeNotSatisfiableError (a read from at or past a file's end),
    UnsupportedError (the server keeps no volumes)."""

    def __init__(self, client: Transport, name: str) -> None:
        super().__init__(_VolumeHandle(client, name))
        #: The volume's name.
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    def _page(self, path: str, depth: int, limit: int | None, cursor: str | None) -> FileListPage:
        q = [("path", path or "/")]
        if limit is not None:
            q.append(("limit", str(int(limit))))
        if cursor:
            q.append(("cursor", cursor))
        return self._list_page(path, q, cursor)

    def list(self, path: str = "") -> builtins.list[FileInfo]:
        """Lists a directory of the volume (default its root): its direct
        children, by name, every one (following the server's pages), with
        their paths in the volume. Symbolic links are listed, not followed."""
        return self._list_all(path, 1)

    def list_page(self, path: str = "", limit: int | None = None, cursor: str | None = None) -> FileListPage:
        """One page of a directory's listing: at most ``limit`` entries
        (None: 1000; at most 10000), from the start or, with ``cursor`` (the
        ``next`` of the page before), after the page before."""
        return self._page(path, 1, limit, cursor)

    def entries(self, path: str = "") -> Iterator[FileInfo]:
        """Every entry of a directory's listing (as :meth:`list`), fetched a
        page at a time as the iteration goes."""
        return self._entries(path, 1)
