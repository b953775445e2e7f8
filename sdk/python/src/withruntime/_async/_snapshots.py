"""Snapshots and fork: the snapshot methods of :class:`~withruntime.Client`
and of :class:`~withruntime.Sandbox` (two mixins, so that _client.py stays
about commands and files), and :class:`~withruntime.ForkResult`.
``_sync/_snapshots.py`` is generated from ``_async/_snapshots.py`` (see
_client.py).

A snapshot is a running sandbox saved whole (memory, processes, files)
while it runs on after a brief pause; any number of sandboxes start from it
(``Sandbox.create(snapshot=...)``), each its own (id, lease, network,
secrets, metering), with the source's processes running where they were.
It belongs to the key that took it: another tenant key's snapshot is not
found. Its bytes count in the key's disk quota and are billed at the
storage price until it is deleted."""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Self, TypeVar

from .. import _http, _wait
from ..errors import APIError, WithRuntimeError, api_error, status_of_code
from ..types import SandboxInfo, SnapshotInfo
from ._base import AsyncSandboxHandle, AsyncTransport

__all__ = ["AsyncSnapshotsMixin", "AsyncSandboxSnapshotsMixin", "AsyncForkResult"]

S = TypeVar("S")


class AsyncSnapshotsMixin(AsyncTransport):
    """The snapshot methods of :class:`~withruntime.Client` (awaited in
    :class:`~withruntime.AsyncClient`)."""

    async def snapshots(self, *, source_sandbox_id: str | None = None) -> builtins.list[SnapshotInfo]:
        """The key's snapshots (an administrator's key: every key's), newest
        first; ``source_sandbox_id`` keeps those taken of that sandbox.
        Raises UnauthorizedError."""
        params = {"sourceSandboxId": source_sandbox_id} if source_sandbox_id else None
        out = await self._json("GET", "/v1/snapshots", params=params)
        return [SnapshotInfo.from_dict(d) for d in out.get("snapshots") or []]

    async def get_snapshot(self, ref: str) -> SnapshotInfo:
        """The snapshot ``ref``: its id (``snap_...``) or its name among the
        key's snapshots. Raises NotFoundError (none, or another key's)."""
        return SnapshotInfo.from_dict(await self._json("GET", _http.snapshot_path(ref)))

    async def delete_snapshot(self, ref: str) -> None:
        """Deletes the snapshot ``ref`` (id or name) and its image; the
        sandboxes made from it run on. Raises NotFoundError (none, or
        another key's), ConflictError (it is still being taken)."""
        await self._send("DELETE", _http.snapshot_path(ref))


@dataclass(frozen=True)
class AsyncForkResult(Generic[S]):
    """What :meth:`Sandbox.fork` made: ``sandboxes[i]`` is the i-th new
    sandbox, or None when ``errors[i]`` (an :class:`APIError`) says why it
    could not be made; each is made or fails on its own. The new sandboxes
    are yours to kill (:meth:`kill_all`)."""

    #: The snapshot they were made from (deleted unless ``snapshot_kept``).
    snapshot: SnapshotInfo
    snapshot_kept: bool
    sandboxes: builtins.list[S | None]
    errors: builtins.list[APIError | None]

    @property
    def made(self) -> builtins.list[S]:
        """The sandboxes that were made, in order."""
        return [s for s in self.sandboxes if s is not None]

    def raise_for_errors(self) -> None:
        """Raises the first error when any sandbox could not be made (the
        others stay made: kill them if you no longer want them)."""
        for e in self.errors:
            if e is not None:
                raise e

    async def kill_all(self) -> None:
        """Kills every sandbox that was made."""
        for s in self.made:
            await s.kill()  # type: ignore[attr-defined]


class AsyncSandboxSnapshotsMixin(AsyncSandboxHandle):
    """``snapshot``, ``snapshots`` and ``fork`` of a sandbox."""

    _id: str

    def _sibling(self, info: SandboxInfo) -> Self:
        """A handle on another sandbox of the same client."""
        raise NotImplementedError

    async def snapshot(self, name: str | None = None, *, mode: str | None = None) -> SnapshotInfo:
        """Saves the running sandbox as a new snapshot and returns it, ready;
        the sandbox runs on after a brief pause (some hundreds of
        milliseconds). Commands running at that moment end with
        ConflictError (their connections close; the command is killed);
        background processes run on.

        ``name`` names it among the key's snapshots (1 to 63 lower-case
        letters, digits, ``.``, ``_``, ``-``), so that creates may give it
        instead of its id. ``mode`` is ``"full"`` (the default: memory,
        processes and files) or ``"filesystem"`` (the files of the root
        filesystem alone, taken while the sandbox runs on; a sandbox made
        from it boots fresh with them, no process running).

        Raises ConflictError (the key has a snapshot of that name; the
        sandbox holds what cannot be saved, such as volumes),
        SandboxPausedError (resume it first), NoSpaceError (the image would
        not fit the key's disk quota or the host: nothing was written),
        UnsupportedError, BadRequestError, LeaseEndedError,
        SandboxStoppedError."""
        body = _http.drop_none({"name": name or None, "mode": mode or None})
        out = await self._client._json("POST", self._path("/snapshots"), body, wait=_wait.CHECKPOINT_WAIT)
        return SnapshotInfo.from_dict(out)

    async def snapshots(self) -> builtins.list[SnapshotInfo]:
        """The snapshots taken of this sandbox that the key sees, newest
        first."""
        out = await self._client._json("GET", "/v1/snapshots", params={"sourceSandboxId": self._id})
        return [SnapshotInfo.from_dict(d) for d in out.get("snapshots") or []]

    async def fork(
        self,
        count: int = 1,
        *,
        keep_snapshot: bool = False,
        name: str | None = None,
        timeout_seconds: int | None = None,
        cpu: float | None = None,
        memory_mib: int | None = None,
        env: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        network: _http.NetworkArg | None = None,
        secrets: Sequence[str] | None = None,
        max_cost_micros: int | None = None,
        on_lease_end: str | None = None,
        auto_resume: bool | None = None,
        mode: str | None = None,
        pause_mode: str | None = None,
    ) -> AsyncForkResult[Self]:
        """Snapshots the running sandbox (which runs on after a brief pause)
        and makes ``count`` sandboxes (1 to 32) from that snapshot, each
        with its source's processes, memory and files and a life of its own:
        its own id, lease, network namespace and secrets.

        The options are :meth:`create`'s, for each new sandbox: ``cpu`` and
        ``memory_mib`` default to the source's (memory at least the
        source's); ``network`` is ``{"internet": False}`` unless given (the
        source's is not inherited), and so are ``secrets``. ``env`` is added
        to the environment of commands started in the new sandboxes;
        processes already running keep theirs. The fork's snapshot is
        deleted once the sandboxes are made, unless ``keep_snapshot``
        (then named ``name``, if given).

        ``mode="filesystem"`` takes a files-only snapshot instead: each new
        sandbox boots fresh with the source's root filesystem files (memory
        at least twice their size plus 128 MiB). ``pause_mode`` is as in
        :meth:`create`.

        Returns a :class:`ForkResult`; a sandbox that could not be made is
        an error there, not an exception. Raises (nothing was made)
        BadRequestError (a bad count or option), and :meth:`snapshot`'s
        errors."""
        options: dict[str, Any] = {
            "timeout_seconds": timeout_seconds,
            "cpu": cpu,
            "memory_mib": memory_mib,
            "env": env,
            "metadata": metadata,
            "network": network,
            "secrets": secrets,
            "max_cost_micros": max_cost_micros,
            "on_lease_end": on_lease_end,
            "auto_resume": auto_resume,
            "pause_mode": pause_mode,
            "mode": mode,
        }
        body = _http.fork_body(count, keep_snapshot=keep_snapshot, name=name, sandbox_options=options)
        wait = _wait.CHECKPOINT_WAIT + _wait.BOOT_WAIT
        out = await self._client._json("POST", self._path("/fork"), body, wait=wait)
        if not isinstance(out, dict) or not isinstance(out.get("sandboxes"), list):
            raise WithRuntimeError(f"withruntime: the fork's answer has no sandboxes: {str(out)[:200]}")
        sandboxes: builtins.list[Self | None] = []
        errors: builtins.list[APIError | None] = []
        for f in out["sandboxes"]:
            made = f.get("sandbox") if isinstance(f, dict) else None
            if isinstance(made, dict) and made.get("id"):
                sandboxes.append(self._sibling(SandboxInfo.from_dict(made)))
                errors.append(None)
                continue
            err = f.get("error") if isinstance(f, dict) else None
            err = err if isinstance(err, dict) else {}
            code = str(err.get("code") or "internal")
            msg = str(err.get("message") or "the server said nothing of this sandbox")
            sandboxes.append(None)
            errors.append(api_error(status_of_code(code), code, msg))
        return AsyncForkResult(
            snapshot=SnapshotInfo.from_dict(out.get("snapshot") or {}),
            snapshot_kept=bool(out.get("snapshotKept")),
            sandboxes=sandboxes,
            errors=errors,
        )
