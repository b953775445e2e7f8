"""The JSON bodies of Runtime's HTTP API (``api/openapi.yaml``) as Python
values, with snake_case attribute names. ``to_dict()`` gives back the wire
JSON (camelCase keys), as the server sent it.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = [
    "WORKSPACE",
    "DEFAULT_EXEC_TIMEOUT_SECONDS",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "MAX_MAX_OUTPUT_BYTES",
    "TIMEOUT_EXIT_CODE",
    "SandboxInfo",
    "ExecResult",
    "Event",
    "ErrorInfo",
    "FileInfo",
    "FileListPage",
    "DEFAULT_LIST_LIMIT",
    "MAX_LIST_LIMIT",
    "NetworkPolicy",
    "SecretInfo",
    "SnapshotInfo",
    "MAX_FORK_COUNT",
    "KeyInfo",
    "UsageRow",
    "UsagePrices",
    "UsageReport",
    "GroupBy",
    "parse_time",
    "SandboxMetric",
    "FileURL",
]

#: Where relative paths and commands without a cwd start.
WORKSPACE = "/workspace"
#: The timeout of a command whose exec sets none, in seconds.
DEFAULT_EXEC_TIMEOUT_SECONDS = 120
#: The cap on each of stdout and stderr in a collected ExecResult (1 MiB)
#: unless ``max_output_bytes`` says otherwise. Streams are not capped.
DEFAULT_MAX_OUTPUT_BYTES = 1 << 20
#: The largest ``max_output_bytes`` a request may ask for (16 MiB).
MAX_MAX_OUTPUT_BYTES = 16 << 20
#: The exit code of a command killed by its timeout (as timeout(1) reports it).
TIMEOUT_EXIT_CODE = 124
#: A listing page's entry count when ``limit`` is not given.
DEFAULT_LIST_LIMIT = 1000
#: The largest ``limit`` of a listing page.
MAX_LIST_LIMIT = 10000

_FRACTION = re.compile(r"(\.\d{6})\d+")


def parse_time(s: str | None) -> datetime | None:
    """Parses an RFC 3339 time as the server writes it (nanoseconds are cut
    to microseconds); ``None`` or ``""`` gives ``None``."""
    if not s:
        return None
    t = datetime.fromisoformat(_FRACTION.sub(r"\1", s))
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t


def _exact(text: str, lossy: bool, b64: str) -> bytes:
    if lossy and b64:
        try:
            return base64.b64decode(b64)
        except ValueError:
            pass
    return text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class VolumeMount:
    """A volume a sandbox mounts: its name, the absolute path inside the
    sandbox, and whether it is read-only."""

    name: str
    path: str
    read_only: bool = False

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VolumeMount:
        return cls(name=d.get("name", ""), path=d.get("path", ""), read_only=bool(d.get("readOnly", False)))


@dataclass(frozen=True)
class SandboxInfo:
    """A sandbox's record as the server returns it."""

    id: str
    #: ``"starting"``, ``"running"``, ``"paused"`` or ``"stopped"``.
    state: Literal["starting", "running", "paused", "stopped"] | str
    template: str
    #: UTC. The server destroys the sandbox at ``lease_ends_at`` unless the
    #: lease is extended with ``set_timeout``.
    created_at: datetime | None
    lease_ends_at: datetime | None
    #: Set once the sandbox is stopped.
    ended_at: datetime | None
    #: Why it stopped, once stopped: ``"deleted"``, ``"lease_ended"``,
    #: ``"failed"``, ``"out_of_memory"`` or ``"spending_limit"`` (its key
    #: reached its daily limit); else ``""``.
    end_reason: str
    #: vCPUs.
    cpu: float
    #: Memory size, in MiB.
    memory_mib: int
    #: Cap on writes to the root filesystem, in MiB.
    disk_mib: int
    metadata: dict[str, str]
    #: What the sandbox has cost so far, in micro-dollars (1 USD =
    #: 1,000,000), as of its last metering sample (every few seconds while
    #: it runs, and once when it stops): CPU used (at least the CPU floor
    #: over its life) plus memory size × time, at the server's prices,
    #: rounded once; the figure ``usage(group_by="sandbox")`` reports. ``create``
    #: answers 0 (nothing is metered yet); ``refresh``, ``list``, ``connect``
    #: and ``set_timeout`` give the current figure.
    cost_micros: int = 0
    #: What the lease end does: ``"stop"`` or ``"pause"``.
    on_lease_end: str = "stop"
    #: What a lease-end pause saves: ``"full"`` (memory, processes, files)
    #: or ``"filesystem"`` (the root filesystem's files alone).
    pause_mode: str = "full"
    #: Whether a request while paused resumes the sandbox first.
    auto_resume: bool = False
    #: When it was paused (UTC); set only while paused.
    paused_at: datetime | None = None
    #: A paused sandbox's image size on the host, in bytes (its memory,
    #: processes and written files; billed at the storage price).
    image_bytes: int = 0
    #: What a paused sandbox's image holds (set only while paused):
    #: ``"full"`` (the resume continues where it was) or ``"filesystem"``
    #: (its files: the resume boots it fresh, no process of before runs).
    image_mode: str = ""
    #: The volumes it mounts (empty: none).
    volumes: list[VolumeMount] = field(default_factory=list)
    _raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SandboxInfo:
        return cls(
            id=d.get("id", ""),
            state=d.get("state", ""),
            template=d.get("template", ""),
            created_at=parse_time(d.get("createdAt")),
            lease_ends_at=parse_time(d.get("leaseEndsAt")),
            ended_at=parse_time(d.get("endedAt")),
            end_reason=d.get("endReason", "") or "",
            cpu=float(d.get("cpu", 0) or 0),
            memory_mib=int(d.get("memoryMiB", 0) or 0),
            disk_mib=int(d.get("diskMiB", 0) or 0),
            metadata=dict(d.get("metadata") or {}),
            cost_micros=int(d.get("costMicros", 0) or 0),
            on_lease_end=d.get("onLeaseEnd", "stop") or "stop",
            pause_mode=d.get("pauseMode", "full") or "full",
            auto_resume=bool(d.get("autoResume", False)),
            paused_at=parse_time(d.get("pausedAt")),
            image_bytes=int(d.get("imageBytes", 0) or 0),
            image_mode=d.get("imageMode", "") or "",
            volumes=[VolumeMount.from_dict(v) for v in d.get("volumes") or []],
            _raw=dict(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The record as the server sent it (camelCase keys)."""
        return dict(self._raw)


@dataclass(frozen=True)
class ExecResult:
    """How a command ended and what it printed. A non-zero ``exit_code`` is a
    result, not an error."""

    #: The exit status; 128+N when killed by signal N; 124 when its timeout
    #: killed it; 127 when bash did not find the command.
    exit_code: int
    #: Standard output and error as UTF-8 text, each capped at
    #: ``max_output_bytes`` (the first bytes are kept). Empty in the result
    #: of a stream, whose output went out as events.
    stdout: str
    stderr: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    #: Every byte the command wrote to each stream, kept or not (counts).
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    #: The output was not valid UTF-8: the exact bytes are in
    #: ``stdout_base64`` (see ``stdout_data``).
    stdout_lossy: bool = False
    stderr_lossy: bool = False
    stdout_base64: str = ""
    stderr_base64: str = ""
    #: The signal that ended the command, such as ``"SIGKILL"``, or ``""``.
    signal: str = ""
    timed_out: bool = False
    oom_killed: bool = False
    #: The command was killed because it kept the sandbox at its process
    #: limit (a fork bomb; exit code 137). The sandbox lives on.
    process_limit_killed: bool = False
    duration_ms: int = 0
    _raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExecResult:
        return cls(
            exit_code=int(d.get("exitCode", 0)),
            stdout=d.get("stdout", "") or "",
            stderr=d.get("stderr", "") or "",
            stdout_truncated=bool(d.get("stdoutTruncated", False)),
            stderr_truncated=bool(d.get("stderrTruncated", False)),
            stdout_bytes=int(d.get("stdoutBytes", 0) or 0),
            stderr_bytes=int(d.get("stderrBytes", 0) or 0),
            stdout_lossy=bool(d.get("stdoutLossy", False)),
            stderr_lossy=bool(d.get("stderrLossy", False)),
            stdout_base64=d.get("stdoutBase64", "") or "",
            stderr_base64=d.get("stderrBase64", "") or "",
            signal=d.get("signal", "") or "",
            timed_out=bool(d.get("timedOut", False)),
            oom_killed=bool(d.get("oomKilled", False)),
            process_limit_killed=bool(d.get("processLimitKilled", False)),
            duration_ms=int(d.get("durationMs", 0) or 0),
            _raw=dict(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The result as the server sent it (camelCase keys)."""
        return dict(self._raw)

    @property
    def ok(self) -> bool:
        """The command exited 0."""
        return self.exit_code == 0

    @property
    def stdout_data(self) -> bytes:
        """The exact bytes kept of stdout (decoded from ``stdout_base64``
        when the output was not UTF-8)."""
        return _exact(self.stdout, self.stdout_lossy, self.stdout_base64)

    @property
    def stderr_data(self) -> bytes:
        """The exact bytes kept of stderr (see ``stdout_data``)."""
        return _exact(self.stderr, self.stderr_lossy, self.stderr_base64)


@dataclass(frozen=True)
class ErrorInfo:
    """The error object of an error answer or error event."""

    code: str
    message: str


@dataclass(frozen=True)
class Event:
    """One event of an exec stream: ``"start"`` (with ``pid``), then
    ``"stdout"`` and ``"stderr"`` chunks (``data``), then one ``"exit"``
    (with ``result``)."""

    type: Literal["start", "stdout", "stderr", "exit", "error"] | str
    #: The command's process id (start events), else 0.
    pid: int = 0
    #: The chunk as UTF-8 text (stdout and stderr events).
    data: str = ""
    #: The chunk held bytes that are not UTF-8: ``data`` has U+FFFD in their
    #: place and ``data_base64`` the exact bytes (see ``data_bytes``).
    lossy: bool = False
    data_base64: str = ""
    #: How the command ended (exit events).
    result: ExecResult | None = None
    #: Why the stream ended without an exit (error events).
    error: ErrorInfo | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Event:
        res = d.get("result")
        err = d.get("error")
        return cls(
            type=d.get("type", ""),
            pid=int(d.get("pid", 0) or 0),
            data=d.get("data", "") or "",
            lossy=bool(d.get("lossy", False)),
            data_base64=d.get("dataBase64", "") or "",
            result=ExecResult.from_dict(res) if isinstance(res, dict) else None,
            error=ErrorInfo(code=str(err.get("code", "")), message=str(err.get("message", "")))
            if isinstance(err, dict)
            else None,
        )

    @property
    def data_bytes(self) -> bytes:
        """The chunk's exact bytes: ``data_base64`` decoded when ``lossy``,
        else ``data`` encoded as UTF-8."""
        return _exact(self.data, self.lossy, self.data_base64)


@dataclass(frozen=True)
class FileURL:
    """A signed file URL (:meth:`Files.signed_url`): it reads (GET) or
    writes (PUT) one file of one sandbox with no API key, as the key that
    made it, until ``expires_at``."""

    #: The whole URL.
    url: str
    #: ``"GET"`` (read) or ``"PUT"`` (write).
    method: str
    path: str
    #: ``"read"`` or ``"write"``.
    operation: str
    #: When the URL stops working (UTC).
    expires_at: datetime | None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FileURL:
        return cls(
            url=d.get("url", ""),
            method=d.get("method", ""),
            path=d.get("path", ""),
            operation=d.get("operation", ""),
            expires_at=parse_time(d.get("expiresAt")),
        )


@dataclass(frozen=True)
class FileInfo:
    """One file or directory in a sandbox."""

    #: The last element of ``path``.
    name: str
    #: The absolute, clean path inside the sandbox.
    path: str
    #: ``"file"``, ``"dir"``, ``"symlink"`` or ``"other"``.
    type: Literal["file", "dir", "symlink", "other"] | str
    #: Size in bytes.
    size: int
    #: Permission bits in octal, such as ``"0644"``.
    mode: str
    mod_time: datetime | None
    uid: int
    gid: int
    #: Where a symlink points, else ``""``.
    target: str = ""
    #: The file's metadata (short text pairs a write gave it, kept as its
    #: extended attributes; anything inside the sandbox can change them),
    #: empty when none.
    metadata: dict[str, str] = field(default_factory=dict)
    _raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FileInfo:
        return cls(
            name=d.get("name", ""),
            path=d.get("path", ""),
            type=d.get("type", ""),
            size=int(d.get("size", 0) or 0),
            mode=d.get("mode", ""),
            mod_time=parse_time(d.get("modTime")),
            uid=int(d.get("uid", 0) or 0),
            gid=int(d.get("gid", 0) or 0),
            target=d.get("target", "") or "",
            metadata={str(k): str(v) for k, v in (d.get("metadata") or {}).items()},
            _raw=dict(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The description as the server sent it (camelCase keys)."""
        return dict(self._raw)

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @property
    def is_file(self) -> bool:
        return self.type == "file"


@dataclass(frozen=True)
class FileListPage:
    """One page of a directory's listing (``files.list_page``). Entries are
    in listing order: by path compared one component at a time in byte
    order (a directory, then its contents, then its next sibling; at depth
    1, by name). While ``truncated``, ask for the next page with ``cursor``
    set to ``next``: each page starts strictly after the page before, so an
    entry present from the first page to the last is listed exactly once."""

    entries: list[FileInfo]
    #: More entries follow this page.
    truncated: bool
    #: The cursor of the next page (an opaque string), ``""`` on the last.
    next: str
    #: The number of entries in the directory itself (its direct children,
    #: whatever the page), for a listing of depth 1; else None.
    total: int | None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FileListPage:
        total = d.get("total")
        return cls(
            entries=[FileInfo.from_dict(e) for e in d.get("entries") or []],
            truncated=bool(d.get("truncated")),
            next=str(d.get("next") or ""),
            total=int(total) if isinstance(total, int) else None,
        )


def _strings(v: Any) -> list[str]:
    return [str(x) for x in v] if isinstance(v, (list, tuple)) else []


@dataclass(frozen=True)
class NetworkPolicy:
    """A sandbox's network policy, enforced on the host.

    ``NetworkPolicy()`` (``{"internet": false}``, the default) reaches
    nothing but loopback; ``NetworkPolicy(internet=True)`` every public
    destination not on ``deny``; ``NetworkPolicy(allow=[...])`` only what
    ``allow`` lists. Private, loopback, link-local, CGNAT and metadata
    addresses are never reached. The server checks a policy: an invalid one
    (such as ``allow`` with ``internet=True``) raises BadRequestError saying
    what is wrong. Wherever the SDK takes a policy, the wire dict
    (``{"allow": [...]}``) works too.
    """

    #: Allow every public destination not on ``deny``.
    internet: bool = False
    #: What the sandbox may reach when ``internet`` is false: host names
    #: (``"api.example.com"``), wildcards (``"*.example.org"``: every
    #: subdomain, not the apex), IP addresses and CIDRs (``"203.0.113.0/24"``).
    allow: list[str] = field(default_factory=list)
    #: Exceptions, in the same forms as ``allow``; deny wins over allow.
    deny: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NetworkPolicy:
        return cls(
            internet=bool(d.get("internet", False)), allow=_strings(d.get("allow")), deny=_strings(d.get("deny"))
        )

    def to_dict(self) -> dict[str, Any]:
        """The policy as the API takes it (empty lists left out)."""
        d: dict[str, Any] = {"internet": self.internet}
        if self.allow:
            d["allow"] = list(self.allow)
        if self.deny:
            d["deny"] = list(self.deny)
        return d


@dataclass(frozen=True)
class SecretInfo:
    """A stored secret as the server describes it: never its value (the
    value is write-only; no answer, log or error of the server contains
    it)."""

    #: The secret's name: the environment variable a sandbox created with
    #: ``secrets=[name]`` sees, holding a placeholder.
    name: str
    #: The host names (or ``*.wildcards``) whose HTTPS requests get the value.
    hosts: list[str]
    #: When the secret was first stored (UTC).
    created_at: datetime | None
    #: When its value or hosts last changed (UTC).
    updated_at: datetime | None
    #: The id of the tenant key the secret belongs to; ``""`` for the
    #: server's own secrets (those of keys without a daily limit).
    owner: str = ""
    _raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SecretInfo:
        return cls(
            name=d.get("name", ""),
            hosts=_strings(d.get("hosts")),
            created_at=parse_time(d.get("createdAt")),
            updated_at=parse_time(d.get("updatedAt")),
            owner=d.get("owner", ""),
            _raw=dict(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The secret as the server sent it (camelCase keys)."""
        return dict(self._raw)


#: The most sandboxes one ``fork`` makes.
MAX_FORK_COUNT = 32


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot's record as the server returns it: a running sandbox saved
    whole (memory, processes, files), from which new sandboxes start
    (``Sandbox.create(snapshot=...)``). It belongs to the key that took it
    (another tenant key's is not found), counts in that key's disk quota and
    is billed at the storage price until it is deleted."""

    #: The snapshot's id (``"snap_"`` and 16 characters).
    id: str
    #: The sandbox it was taken of.
    source_sandbox_id: str
    #: The source's template, and so every sandbox's made from it.
    template: str
    #: What it holds: ``"full"`` (memory, processes and files) or
    #: ``"filesystem"`` (the files of its root filesystem alone).
    mode: Literal["full", "filesystem"] | str
    #: ``"creating"`` while its image is written, then ``"ready"``.
    state: Literal["creating", "ready"] | str
    #: The size of its image on the host, in bytes.
    bytes: int
    #: The source's vCPUs, which a create from it gets by default.
    cpu: float
    #: The source's memory, in MiB: a sandbox made from it has at least this.
    memory_mib: int
    #: The source's disk cap, in MiB: a sandbox made from it has exactly this.
    disk_mib: int
    #: When it was taken (UTC).
    created_at: datetime | None
    #: What keeping it has cost so far, in micro-dollars (1 USD =
    #: 1,000,000): its bytes × time at the storage price, as of the last
    #: metering sample.
    cost_micros: int = 0
    #: Its name among its key's snapshots, or ``""``.
    name: str = ""
    #: When the server's snapshot retention deletes it (UTC), or None: kept
    #: until deleted.
    expires_at: datetime | None = None
    _raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SnapshotInfo:
        return cls(
            id=d.get("id", ""),
            source_sandbox_id=d.get("sourceSandboxId", ""),
            template=d.get("template", ""),
            mode=d.get("mode", ""),
            state=d.get("state", ""),
            bytes=int(d.get("bytes", 0) or 0),
            cpu=float(d.get("cpu", 0) or 0),
            memory_mib=int(d.get("memoryMiB", 0) or 0),
            disk_mib=int(d.get("diskMiB", 0) or 0),
            created_at=parse_time(d.get("createdAt")),
            cost_micros=int(d.get("costMicros", 0) or 0),
            name=d.get("name", "") or "",
            expires_at=parse_time(d.get("expiresAt")),
            _raw=dict(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The snapshot as the server sent it (camelCase keys)."""
        return dict(self._raw)


@dataclass(frozen=True)
class KeyInfo:
    """An API key as the server describes it. ``secret`` is set only in the
    answer to ``create_key`` (the server cannot show it again); it is left
    out of ``repr()`` so that it does not end up in logs."""

    #: The key's id (``"key_..."``), used to revoke it. Not a credential.
    id: str
    #: The label given at creation.
    name: str
    #: The start of the secret (``"wr_"`` and 6 more characters), to recognise it.
    prefix: str
    #: When it was created (UTC).
    created_at: datetime | None
    #: When it was revoked (UTC); None while it is live.
    revoked_at: datetime | None = None
    #: The key's spending limit in micro-dollars (1 USD = 1,000,000) per UTC
    #: day; None if it has none. Once the key's sandboxes have cost that
    #: much today, they are stopped (``end_reason`` ``"spending_limit"``)
    #: and its creates raise SpendingLimitError until midnight UTC.
    daily_limit_micros: int | None = None
    #: The disk quota that binds the key, in MiB: its running and paused
    #: sandboxes' disk_mib plus its pause images (its own, or the server's
    #: default for a key with a daily limit); None if none does.
    disk_quota_mib: int | None = None
    #: How many of the key's sandboxes may be paused at once; None: no bound.
    paused_quota: int | None = None
    #: How many sandboxes the key may hold at once, starting, running and
    #: paused together; None: no bound.
    sandboxes_quota: int | None = None
    #: The bearer token (``"wr_..."``) in ``create_key``'s answer, else ``""``.
    #: Pass it as ``api_key=``.
    secret: str = field(default="", repr=False)
    _raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KeyInfo:
        limit = d.get("dailyLimitMicros")
        return cls(
            id=d.get("id", ""),
            name=d.get("name", ""),
            prefix=d.get("prefix", ""),
            created_at=parse_time(d.get("createdAt")),
            revoked_at=parse_time(d.get("revokedAt")),
            daily_limit_micros=int(limit) if limit else None,
            disk_quota_mib=int(d["diskQuotaMiB"]) if d.get("diskQuotaMiB") else None,
            paused_quota=int(d["pausedQuota"]) if d.get("pausedQuota") else None,
            sandboxes_quota=int(d["sandboxesQuota"]) if d.get("sandboxesQuota") else None,
            secret=d.get("secret", "") or "",
            _raw=dict(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The key as the server sent it (camelCase keys; with the secret if
        it had one)."""
        return dict(self._raw)

    @property
    def revoked(self) -> bool:
        """Whether the key was revoked."""
        return self.revoked_at is not None


#: How a usage report groups its rows: by UTC day, by sandbox or by API key.
GroupBy = Literal["day", "sandbox", "key"]


@dataclass(frozen=True)
class SandboxMetric:
    """One sample of a sandbox's resource use, measured by the host
    (:meth:`Sandbox.metrics`)."""

    #: When the sample was taken (UTC).
    at: datetime | None
    #: The number of CPUs the sandbox's programs see.
    cpu_count: int
    #: The CPU its own processes used since the sample before (its start
    #: for the first), as a percentage of its vCPUs, 0-100.
    cpu_used_percent: float
    #: The memory it holds on the host, in bytes (its isolation layer and a
    #: memory-backed disk included), and its memory size.
    memory_used_bytes: int
    memory_total_bytes: int
    #: What its writes take on the host's disk, in bytes (0 when the driver
    #: cannot measure it), and its disk size.
    disk_used_bytes: int
    disk_total_bytes: int

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SandboxMetric:
        return cls(
            at=parse_time(d.get("at")),
            cpu_count=int(d.get("cpuCount", 0) or 0),
            cpu_used_percent=float(d.get("cpuUsedPercent", 0) or 0),
            memory_used_bytes=int(d.get("memoryUsedBytes", 0) or 0),
            memory_total_bytes=int(d.get("memoryTotalBytes", 0) or 0),
            disk_used_bytes=int(d.get("diskUsedBytes", 0) or 0),
            disk_total_bytes=int(d.get("diskTotalBytes", 0) or 0),
        )


@dataclass(frozen=True)
class UsageRow:
    """The metered usage and cost of one group of sandboxes (a day, a
    sandbox or a key) within a report's window.

    The figures come from the server's ledger: every running sandbox is
    sampled every few seconds (``serve --meter-interval``) and once when it
    stops; a sampled interval counts in the window and day in which it ends.
    """

    #: The UTC day (``"YYYY-MM-DD"``), the sandbox id (``"sbx_..."``) or the
    #: key id (``"key_..."``), as the report is grouped; ``"total"`` for its total.
    group: str
    #: CPU time the sandboxes' own processes used, in CPU-seconds, as the
    #: host measures it (their host CPU less their isolation layer's), to
    #: the millisecond.
    cpu_seconds: float
    #: CPU time billed, in CPU-seconds: per sandbox the larger of what it
    #: used and the floor (``prices.cpu_floor_vcpu`` × its wall-clock
    #: seconds), summed.
    billed_cpu_seconds: float
    #: Memory size × time running, in GiB-seconds.
    gib_seconds: float
    #: The cost in micro-dollars (1 USD = 1,000,000): billed CPU and memory
    #: at the report's prices, summed unrounded over the row's sandboxes
    #: and rounded once.
    cost_micros: int
    #: Host CPU time the sandboxes' isolation layer (gVisor's kernel and
    #: file proxy) spent, in CPU-seconds, not billed: the host's CPU cost is
    #: ``cpu_seconds + overhead_cpu_seconds``.
    overhead_cpu_seconds: float = 0.0
    #: Paused sandboxes' image size × time paused, in GiB-seconds (a paused
    #: sandbox is billed no CPU and no memory).
    storage_gib_seconds: float = 0.0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UsageRow:
        return cls(
            group=d.get("group", ""),
            cpu_seconds=float(d.get("cpuSeconds", 0) or 0),
            billed_cpu_seconds=float(d.get("billedCpuSeconds", 0) or 0),
            gib_seconds=float(d.get("gibSeconds", 0) or 0),
            cost_micros=int(d.get("costMicros", 0) or 0),
            overhead_cpu_seconds=float(d.get("overheadCpuSeconds", 0) or 0),
            storage_gib_seconds=float(d.get("storageGibSeconds", 0) or 0),
        )


@dataclass(frozen=True)
class UsagePrices:
    """The prices a usage report was computed with (the server's
    configuration: ``serve --price-cpu``, ``--price-memory``, ``--cpu-floor``)."""

    #: Micro-dollars per vCPU-hour of CPU used (reference 25,000 = $0.025).
    cpu_micros_per_vcpu_hour: float
    #: Micro-dollars per GiB-hour of memory size (reference 7,500 = $0.0075).
    memory_micros_per_gib_hour: float
    #: The least CPU a running sandbox is billed, in vCPUs (reference 0.05).
    cpu_floor_vcpu: float
    #: Micro-dollars per GiB-hour of a paused sandbox's image
    #: (``serve --price-storage``; default 100 = $0.0001).
    storage_micros_per_gib_hour: float = 0.0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UsagePrices:
        return cls(
            cpu_micros_per_vcpu_hour=float(d.get("cpuMicrosPerVcpuHour", 0) or 0),
            memory_micros_per_gib_hour=float(d.get("memoryMicrosPerGibHour", 0) or 0),
            cpu_floor_vcpu=float(d.get("cpuFloorVcpu", 0) or 0),
            storage_micros_per_gib_hour=float(d.get("storageMicrosPerGibHour", 0) or 0),
        )


@dataclass(frozen=True)
class UsageTrial:
    """A trial key's allowance of sandbox-hours (the wall time of all its
    sandboxes, ever) and what is left."""

    allowance_hours: float
    used_hours: float
    left_hours: float

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UsageTrial:
        return cls(
            allowance_hours=float(d.get("allowanceHours", 0) or 0),
            used_hours=float(d.get("usedHours", 0) or 0),
            left_hours=float(d.get("leftHours", 0) or 0),
        )


@dataclass(frozen=True)
class UsageReport:
    """A whole usage report (GET /v1/usage): the window the server used,
    the prices, one row per group with usage in the window (sorted by
    group) and the total over all of them."""

    #: Start of the window, exclusive (UTC).
    from_: datetime | None
    #: End of the window, inclusive (UTC).
    to: datetime | None
    #: ``"day"``, ``"sandbox"`` or ``"key"``.
    group_by: GroupBy | str
    prices: UsagePrices
    rows: list[UsageRow]
    #: The total over every row (``group`` ``"total"``); its ``cost_micros``
    #: is rounded once from all of them, so it may differ by a micro-dollar
    #: from the sum of the rows'.
    total: UsageRow
    #: For a trial key (``withruntime login --trial``): its allowance of
    #: sandbox-hours and what is left; at 0 left, creates fail with 429.
    trial: UsageTrial | None = None
    _raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UsageReport:
        t = d.get("trial")
        return cls(
            from_=parse_time(d.get("from")),
            to=parse_time(d.get("to")),
            group_by=d.get("groupBy", ""),
            prices=UsagePrices.from_dict(d.get("prices") or {}),
            rows=[UsageRow.from_dict(r) for r in d.get("rows") or []],
            total=UsageRow.from_dict(d.get("total") or {"group": "total"}),
            trial=UsageTrial.from_dict(t) if isinstance(t, dict) else None,
            _raw=dict(d),
        )

    def to_dict(self) -> dict[str, Any]:
        """The report as the server sent it (camelCase keys)."""
        return dict(self._raw)
