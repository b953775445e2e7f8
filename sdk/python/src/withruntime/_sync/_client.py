# GENERATED from withruntime/_async/_client.py by sdk/python/scripts/generate.sh (unasync); do not edit.
# Change the async source and run sdk/python/scripts/generate.sh to regenerate.
"""The client and the sandbox handle: Client, Sandbox, ExecStream (in
``withruntime/_sync/_client.py``) and AsyncClient, AsyncSandbox,
AsyncExecStream (in ``withruntime/_async/_client.py``).

The async module is written by hand; the sync one is generated from it by
``sdk/python/scripts/generate.sh`` (unasync: ``async``/``await`` dropped,
``Async`` names made plain, ``_io_async`` made ``_io_sync``). Docstrings are
shared, so they speak of the sync spelling; the async one awaits each call."""

from __future__ import annotations

import builtins
import json
from collections.abc import Generator, Iterator, Mapping, Sequence
from types import TracebackType
from typing import IO, Any, Self, TextIO

import httpx

from .. import _exec, _http, _wait
from .. import _io_sync as _io
from .._config import resolve_config
from ..errors import (
    APIError,
    ConflictError,
    SandboxGoneError,
    SandboxStoppedError,
    WithRuntimeError,
)
from ..types import (
    Event,
    ExecResult,
    GroupBy,
    KeyInfo,
    NetworkPolicy,
    SandboxInfo,
    SandboxMetric,
    SecretInfo,
    UsageReport,
    UsageRow,
)
from ..volumes import VolumeMountArg
from ._code import CodeInterpreterMixin
from ._files import Files
from ._pty import Pty
from ._snapshots import SandboxSnapshotsMixin, SnapshotsMixin
from ._templates import TemplatesMixin
from ._volumes import VolumesMixin

__all__ = ["Client", "Sandbox", "ExecStream"]


class Client(TemplatesMixin, SnapshotsMixin, VolumesMixin):
    """A connection to one Runtime server. Safe to share between threads.

    ``Client()`` finds the server in ``base_url``/``api_key``, else
    ``WITHRUNTIME_URL``/``WITHRUNTIME_API_KEY``, else
    ``~/.config/withruntime/config.json`` (``{"url", "apiKey"}``); with none,
    it raises :class:`~withruntime.NotConfiguredError` saying how to set one
    up. Pass ``http_client`` to use your own ``httpx.Client`` (it then stays
    yours to close).

    No call waits forever on a server that accepted the connection and went
    silent: ``response_timeout`` (seconds, default 60) bounds the wait for
    an answer's headers, beyond what the call runs on the server first (a
    collected exec its ``timeout_seconds``, default 120; ``run_code`` its
    timeout plus a kernel's start; ``create`` a sandbox's boot, 2 min;
    ``pause``/``resume`` 10 min; a template build's pull 2 min);
    ``idle_timeout`` (seconds, default 60) bounds each read of a stream or
    download (the server sends a heartbeat every 2 s, so 5 or more is
    safe). ``None`` or 0 is no bound. A bound that runs out raises
    :class:`~withruntime.ServerTimeoutError`, which names the server and
    the seconds waited. They apply per request, over ``http_client``'s own.

    Templates (root filesystems from images and Dockerfiles) are managed
    with the template methods (see :mod:`withruntime.templates`); snapshots
    with :meth:`snapshots`, :meth:`get_snapshot` and :meth:`delete_snapshot`
    (taken with :meth:`Sandbox.snapshot`); volumes, storage that outlives
    sandboxes, with :meth:`create_volume`, :meth:`volumes`,
    :meth:`get_volume`, :meth:`delete_volume` and :meth:`volume_files` (see
    :mod:`withruntime.volumes`).

    :class:`~withruntime.AsyncClient` is its asyncio twin (an
    ``httpx.AsyncClient`` underneath): the same methods, awaited, and
    ``async with``.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        http_client: httpx.Client | None = None,
        response_timeout: float | None = _wait.DEFAULT_RESPONSE_TIMEOUT,
        idle_timeout: float | None = _wait.DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        cfg = resolve_config(base_url, api_key)
        self._response = _wait.check_bound(response_timeout, "response_timeout")
        self._idle = _wait.check_bound(idle_timeout, "idle_timeout")
        self.base_url: str = cfg.base_url
        self._api_key = cfg.api_key
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(timeout=_http.DEFAULT_TIMEOUT)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    def close(self) -> None:
        """Closes the HTTP connections (if this client opened them)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sandboxes -------------------------------------------------------

    def create(
        self,
        *,
        template: str | None = None,
        timeout_seconds: int | None = None,
        cpu: float | None = None,
        memory_mib: int | None = None,
        disk_mib: int | None = None,
        env: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        network: _http.NetworkArg | None = None,
        secrets: Sequence[str] | None = None,
        max_cost_micros: int | None = None,
        on_lease_end: str | None = None,
        auto_resume: bool | None = None,
        snapshot: str | None = None,
        volumes: Sequence[VolumeMountArg] | None = None,
        pause_mode: str | None = None,
    ) -> Sandbox:
        """Creates a sandbox and returns once it runs. See :meth:`Sandbox.create`."""
        body = _http.create_body(
            template=template,
            timeout_seconds=timeout_seconds,
            cpu=cpu,
            memory_mib=memory_mib,
            disk_mib=disk_mib,
            env=env,
            metadata=metadata,
            network=network,
            secrets=secrets,
            max_cost_micros=max_cost_micros,
            on_lease_end=on_lease_end,
            auto_resume=auto_resume,
            snapshot=snapshot,
            volumes=volumes,
            pause_mode=pause_mode,
        )
        info = SandboxInfo.from_dict(self._json("POST", "/v1/sandboxes", body, wait=_wait.BOOT_WAIT))
        return Sandbox(self, info.id, info)

    def create_and_exec(
        self,
        command: str | Sequence[str] | None = None,
        *,
        argv: Sequence[str] | None = None,
        cwd: str | None = None,
        command_env: Mapping[str, str] | None = None,
        command_timeout_seconds: float | None = None,
        max_output_bytes: int | None = None,
        stdin: str | None = None,
        user: str | None = None,
        **sandbox_options: Any,
    ) -> tuple[Sandbox, ExecResult]:
        """Creates a sandbox and runs a command in it, in one request: the
        server runs it as soon as the sandbox is ready. Returns the
        sandbox (kill it when done) and the command's collected result.

        The command takes :meth:`Sandbox.exec`'s arguments (its ``env`` and
        ``timeout_seconds`` are ``command_env`` and
        ``command_timeout_seconds`` here); ``sandbox_options`` are
        :meth:`create`'s. Raises :meth:`create`'s errors when no sandbox was
        made (BadRequestError for a bad command too); when the sandbox was
        made but the command could not run (a cwd that does not exist, an
        unknown program), the APIError of its code, with the sandbox as its
        ``sandbox`` attribute.
        """
        body = _http.create_exec_body(
            command,
            argv=argv,
            cwd=cwd,
            command_env=command_env,
            command_timeout_seconds=command_timeout_seconds,
            max_output_bytes=max_output_bytes,
            stdin=stdin,
            user=user,
            sandbox_options=sandbox_options,
        )
        wait = _wait.BOOT_WAIT + _wait.run_wait(command_timeout_seconds, _wait.EXEC_DEFAULT)
        info, res, err = _http.first_answer(self._json("POST", "/v1/sandboxes", body, wait=wait))
        sbx = Sandbox(self, str(info["id"]), SandboxInfo.from_dict(info))
        if err is not None:
            err.sandbox = sbx  # type: ignore[attr-defined]
            raise err
        assert res is not None
        return sbx, ExecResult.from_dict(res)

    def run_once(
        self,
        command: str | Sequence[str] | None = None,
        *,
        argv: Sequence[str] | None = None,
        cwd: str | None = None,
        command_env: Mapping[str, str] | None = None,
        command_timeout_seconds: float | None = None,
        max_output_bytes: int | None = None,
        stdin: str | None = None,
        user: str | None = None,
        **sandbox_options: Any,
    ) -> ExecResult:
        """The one-shot: creates a sandbox with the command as its first
        (:meth:`create_and_exec`), destroys the sandbox, and returns the
        command's result. Raises :meth:`create_and_exec`'s errors (the
        sandbox destroyed first)."""
        try:
            sbx, res = self.create_and_exec(
                command,
                argv=argv,
                cwd=cwd,
                command_env=command_env,
                command_timeout_seconds=command_timeout_seconds,
                max_output_bytes=max_output_bytes,
                stdin=stdin,
                user=user,
                **sandbox_options,
            )
        except APIError as e:
            made = getattr(e, "sandbox", None)
            if made is not None:
                made.kill()
            raise
        sbx.kill()
        return res

    def connect(self, sandbox_id: str) -> Sandbox:
        """A handle on the sandbox ``sandbox_id``, resumed first if it is
        paused. Raises NotFoundError, or LeaseEndedError /
        SandboxStoppedError when it is no longer running."""
        sbx = Sandbox(self, sandbox_id)
        info = sbx.refresh()
        _exec.check_running(info)
        if info.state == "paused":
            try:
                sbx.resume()
            except ConflictError:
                sbx.refresh()  # resumed meanwhile by another caller
        return sbx

    def list(
        self, *, state: str | None = None, metadata: Mapping[str, str] | None = None
    ) -> builtins.list[SandboxInfo]:
        """Lists sandboxes, newest first, stopped ones included; filter by
        ``state`` (``"starting"``, ``"running"``, ``"stopped"``) and by
        ``metadata`` (every pair must match)."""
        out = self._json("GET", "/v1/sandboxes", params=_http.list_params(state, metadata))
        return [SandboxInfo.from_dict(d) for d in out.get("sandboxes") or []]

    # -- secrets -----------------------------------------------------------

    def set_secret(self, name: str, value: str, hosts: Sequence[str]) -> SecretInfo:
        """Stores (or replaces) a write-only secret and returns its
        description, without the value.

        A sandbox created with ``secrets=[name]`` sees ``name`` as an
        environment variable holding a placeholder (``wr_placeholder_...``);
        the egress proxy replaces the placeholder with ``value`` in the
        headers of HTTPS requests to ``hosts`` (host names or
        ``*.wildcards``, not IP addresses), and nowhere else. The sandbox's
        network policy must allow those hosts. Sandboxes created afterwards
        get a replaced value; running ones keep theirs.

        ``name`` is letters, digits and ``_``, not starting with a digit;
        ``value`` at most 8 KiB, without line breaks. Raises BadRequestError
        (whose message never contains the value), UnauthorizedError.
        """
        return SecretInfo.from_dict(self._json("POST", "/v1/secrets", _http.secret_body(name, value, hosts)))

    def list_secrets(self) -> builtins.list[SecretInfo]:
        """The stored secrets by name, with their hosts and times; values
        are never returned. Raises UnauthorizedError."""
        out = self._json("GET", "/v1/secrets")
        return [SecretInfo.from_dict(d) for d in out.get("secrets") or []]

    def delete_secret(self, name: str) -> None:
        """Deletes a stored secret: new sandboxes can no longer name it;
        running ones created with it keep using it until the server
        restarts. Raises NotFoundError (no such secret)."""
        self._send("DELETE", _http.secret_path(name))

    # -- keys --------------------------------------------------------------

    def create_key(self, name: str, daily_limit_micros: int | None = None) -> KeyInfo:
        """Creates an API key labelled ``name`` (1 to 100 characters) and
        returns it with its ``secret`` (``wr_...``), which is shown this
        once: store it, and pass it as ``api_key=``.

        ``daily_limit_micros`` caps what the key's sandboxes may cost per UTC
        day, in micro-dollars (1 USD = 1,000,000; None or 0: no limit). Once
        reached, the key's running sandboxes are stopped and its creates
        raise SpendingLimitError until midnight UTC. Raises BadRequestError
        (an empty or too long name, a negative limit), UnauthorizedError.
        """
        return KeyInfo.from_dict(self._json("POST", "/v1/keys", _http.key_body(name, daily_limit_micros)))

    def list_keys(self) -> builtins.list[KeyInfo]:
        """Every API key of the server, revoked ones included, oldest first,
        without their secrets. Raises UnauthorizedError."""
        out = self._json("GET", "/v1/keys")
        return [KeyInfo.from_dict(d) for d in out.get("keys") or []]

    def revoke_key(self, key_id: str) -> None:
        """Revokes the live key ``key_id`` (``key_...``, its id, not its
        secret) at once: requests with it then raise UnauthorizedError.
        Sandboxes it created keep running. Raises NotFoundError (no such
        live key), ConflictError (the key this client authenticates with)."""
        self._send("DELETE", _http.key_path(key_id))

    # -- usage -------------------------------------------------------------

    def usage(
        self,
        from_: _http.When | None = None,
        to: _http.When | None = None,
        group_by: GroupBy | None = None,
    ) -> builtins.list[UsageRow]:
        """Metered usage and cost per UTC day, sandbox or key (``group_by``
        ``"day"``, the default, ``"sandbox"`` or ``"key"``): one
        :class:`UsageRow` per group with usage in the window, sorted by
        group, with CPU-seconds, GiB-seconds and micro-dollars (see there
        for where the figures come from). Empty if nothing ran.

        The window runs from ``from_`` (exclusive; default 30 days before
        ``to``, at midnight UTC) to ``to`` (inclusive; default now). Each is
        a datetime (naive ones are taken as UTC), a date (a UTC day: for
        ``to``, through its end), or a string in RFC 3339 or YYYY-MM-DD.
        :meth:`usage_report` also gives the total and the prices. Raises
        BadRequestError (an unknown ``group_by``, ``from_`` not before ``to``).
        """
        return (self.usage_report(from_, to, group_by)).rows

    def usage_report(
        self,
        from_: _http.When | None = None,
        to: _http.When | None = None,
        group_by: GroupBy | None = None,
    ) -> UsageReport:
        """The whole usage report (see :meth:`usage`): the window the server
        used, its prices, the rows and their total."""
        out = self._json("GET", "/v1/usage", params=_http.usage_params(from_, to, group_by))
        return UsageReport.from_dict(out)

    # -- HTTP --------------------------------------------------------------

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
    ) -> httpx.Response:
        """Sends one request; an error status raises the APIError of its code.
        With ``stream``, the caller closes the answer."""
        hdrs = _http.headers(self._api_key, accept, content_type)
        if extra_headers:
            hdrs.update(extra_headers)
        if json_body is not None:
            content = json.dumps(json_body).encode("utf-8")
            hdrs["Content-Type"] = _http.JSON
        timeout = _wait.request_timeout(self._response, self._idle, wait)
        try:
            req = self._http.build_request(
                method, self.base_url + path, params=params, content=content, headers=hdrs, timeout=timeout
            )
        except httpx.HTTPError as e:
            raise _http.unreachable(self.base_url, e) from e
        try:
            resp = self._http.send(req, stream=True)
        except httpx.HTTPError as e:
            raise _wait.send_error(self.base_url, req, e) from e
        if resp.status_code >= 400:
            try:
                data = resp.read()
            except httpx.HTTPError:
                data = b""
            finally:
                resp.close()
            raise _http.decode_error(resp.status_code, resp.reason_phrase, data)
        if stream:
            _wait.after_headers(resp, self._idle)
        if not stream:
            try:
                resp.read()
            except httpx.HTTPError as e:
                raise _wait.read_error(self.base_url, resp, e, f"reading the answer to {method} {path}") from e
            finally:
                resp.close()
        return resp

    def _json(self, method: str, path: str, body: Any = None, *, params: Any = None, wait: float = 0.0) -> Any:
        resp = self._send(method, path, params=params, json_body=body, wait=wait)
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError as e:
            raise WithRuntimeError(f"withruntime: decoding the answer to {method} {path}: {e}") from e


class Sandbox(CodeInterpreterMixin, SandboxSnapshotsMixin):
    """A handle on one sandbox. Use it as a context manager to destroy the
    sandbox on exit::

        with Sandbox.create(timeout_seconds=600) as sbx:
            sbx.files.write_file("hello.py", "print(6 * 7)\\n")
            res = sbx.exec("python3 hello.py")
            # res.exit_code == 0, res.stdout == "42\\n"

    :class:`~withruntime.AsyncSandbox` is its asyncio twin::

        async with AsyncSandbox.create(timeout_seconds=600) as sbx:
            res = await sbx.exec("python3 -c 'print(6*7)'")

    (``sbx = await AsyncSandbox.create(...)`` works too; then ``await
    sbx.kill()`` when done.)
    """

    def __init__(
        self, client: Client, sandbox_id: str, info: SandboxInfo | None = None, *, _owns_client: bool = False
    ) -> None:
        self._conn = client
        self._id = sandbox_id
        self._info = info
        self._owns_client = _owns_client
        self._closed = False
        self._lock = _io.Lock()
        self._killed = False

    # -- construction ------------------------------------------------------

    @classmethod
    @_io.context_factory
    def create(
        cls,
        *,
        template: str | None = None,
        timeout_seconds: int | None = None,
        cpu: float | None = None,
        memory_mib: int | None = None,
        disk_mib: int | None = None,
        env: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        network: _http.NetworkArg | None = None,
        secrets: Sequence[str] | None = None,
        max_cost_micros: int | None = None,
        on_lease_end: str | None = None,
        auto_resume: bool | None = None,
        snapshot: str | None = None,
        volumes: Sequence[VolumeMountArg] | None = None,
        pause_mode: str | None = None,
        client: Client | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> Sandbox:
        """Creates a sandbox and returns once it runs (the async one: await
        the answer, or use it in ``async with``).

        Every option is optional; unset ones take the server's defaults:
        ``template`` ("base": Debian with python3), ``timeout_seconds`` (the
        lease: 300; the sandbox is destroyed this long after creation unless
        extended with :meth:`set_timeout`), ``cpu`` (1 vCPU), ``memory_mib``
        (512), ``disk_mib`` (2048), ``env`` (set for every command),
        ``metadata`` (labels, usable as :meth:`list` filters).

        ``network`` is the :class:`~withruntime.NetworkPolicy` (or its dict,
        such as ``{"allow": ["packages.example"]}``; default ``{"internet": False}``:
        loopback only); it can change later with :meth:`set_network`.
        ``secrets`` names stored secrets (:meth:`Client.set_secret`): each is
        an environment variable holding a placeholder that the egress proxy
        replaces with the value for the secret's hosts, which the policy must
        allow. ``max_cost_micros`` refuses the sandbox (CostCapError) if its
        first lease could cost more, in micro-dollars (1 USD = 1,000,000):
        every vCPU busy plus the memory size, for the whole lease.

        ``snapshot`` (an id, ``snap_...``, or a name among the key's
        snapshots; see :meth:`snapshot`) starts the sandbox from that
        snapshot instead of booting the template: its processes run on where
        they were, with their memory and files. Its template and disk are
        then the snapshot's (leave ``template`` and ``disk_mib`` out),
        ``memory_mib`` at least the snapshot's (default: the same) and
        ``cpu`` by default its source's. ``env`` is added to the environment
        of commands started afterwards; programs already running keep
        theirs. A snapshot that is not found (or is another key's) raises
        NotFoundError.

        ``volumes`` mounts the key's volumes (:meth:`Client.create_volume`),
        each a :class:`~withruntime.VolumeMount` (``VolumeMount("cache",
        "/cache", read_only=True)``) or its dict (``{"name", "path",
        "readOnly"}``); at most 8, at absolute paths apart from each other,
        not ``/`` and not in /proc, /sys, /dev, /run, /tmp or /etc, each a
        directory the template has (in the base template /data, /mnt or
        /srv: a sandbox never adds one to its template). Their
        files outlive the sandbox (see :mod:`withruntime.volumes`). A
        sandbox with volumes starts cold (never from the server's warm
        pool). A volume that is not the key's raises NotFoundError; one
        being created, deleted or damaged ConflictError.

        ``pause_mode`` is what a lease-end pause (``on_lease_end="pause"``)
        saves: ``"full"`` (the default: memory, processes, files) or
        ``"filesystem"`` (the root filesystem's files alone, as
        :meth:`pause` with ``mode="filesystem"``).

        The server is ``client``'s, else the one found by ``Client(base_url,
        api_key)``. Raises BadRequestError (invalid options, unknown
        template or secret), CostCapError, SpendingLimitError (the key's
        daily limit is reached), UnavailableError (no capacity),
        UnauthorizedError, NotConfiguredError.
        """
        owns = client is None
        c = client or Client(base_url, api_key)
        try:
            sbx = c.create(
                template=template,
                timeout_seconds=timeout_seconds,
                cpu=cpu,
                memory_mib=memory_mib,
                disk_mib=disk_mib,
                env=env,
                metadata=metadata,
                network=network,
                secrets=secrets,
                max_cost_micros=max_cost_micros,
                on_lease_end=on_lease_end,
                auto_resume=auto_resume,
                snapshot=snapshot,
                volumes=volumes,
                pause_mode=pause_mode,
            )
        except BaseException:
            if owns:
                c.close()
            raise
        sbx._owns_client = owns
        return sbx

    @classmethod
    @_io.context_factory
    def connect(
        cls,
        sandbox_id: str,
        *,
        client: Client | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> Sandbox:
        """A handle on an existing sandbox, resumed first if it is paused
        (the async one: await it, or use it in ``async with``).
        Raises NotFoundError, or LeaseEndedError / SandboxStoppedError when
        it is no longer running."""
        owns = client is None
        c = client or Client(base_url, api_key)
        try:
            sbx = c.connect(sandbox_id)
        except BaseException:
            if owns:
                c.close()
            raise
        sbx._owns_client = owns
        return sbx

    @classmethod
    def list(
        cls,
        *,
        state: str | None = None,
        metadata: Mapping[str, str] | None = None,
        client: Client | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> builtins.list[SandboxInfo]:
        """Lists sandboxes (newest first, stopped ones included), filtered by
        ``state`` and ``metadata``."""
        if client is not None:
            return client.list(state=state, metadata=metadata)
        with Client(base_url, api_key) as c:
            return c.list(state=state, metadata=metadata)

    # -- record ------------------------------------------------------------

    @property
    def _client(self) -> Client:
        if self._closed:
            raise SandboxStoppedError(
                410,
                "sandbox_stopped",
                f"sandbox {self._id} was destroyed when this handle was closed (close() or the end of its "
                "with block); create a new sandbox",
            )
        return self._conn

    @property
    def id(self) -> str:
        """The sandbox's id (``sbx_...``)."""
        return self._id

    @property
    def sandbox_id(self) -> str:
        """The sandbox's id (same as :attr:`id`)."""
        return self._id

    @property
    def client(self) -> Client:
        return self._conn

    @property
    def info(self) -> SandboxInfo | None:
        """The sandbox's record as last seen by this handle (at create,
        connect, :meth:`refresh` or :meth:`set_timeout`)."""
        return self._info

    def __repr__(self) -> str:
        state = self._info.state if self._info else "?"
        return f"{type(self).__name__}(id={self._id!r}, state={state!r})"

    def refresh(self) -> SandboxInfo:
        """Fetches the sandbox's record. Raises NotFoundError."""
        info = SandboxInfo.from_dict(self._client._json("GET", self._path()))
        self._info = info
        return info

    def pause(self, mode: str | None = None) -> SandboxInfo:
        """Saves the running sandbox whole (processes with their memory,
        files) on the server's host and stops it: it is billed only for its
        image until :meth:`resume` (or :meth:`connect`, or any request when
        it has ``auto_resume``). Commands running at the pause end with
        SandboxPausedError; background processes run on after the resume.

        ``mode="filesystem"`` saves only the files of its root filesystem
        (not /tmp, /dev/shm or volumes): its processes end and its memory is
        freed at once, and the resume boots it fresh with the same id and
        those files; no process of before runs (``image_mode`` is
        ``"filesystem"`` while it is paused).

        Raises ConflictError (not running, or already paused; or, for a
        filesystem pause, files whose archive would pass its disk size: a
        sparse file), NoSpaceError (no room on the host; it runs on),
        BadRequestError (another mode), SandboxGoneError."""
        body = {"mode": mode} if mode else None
        info = SandboxInfo.from_dict(
            self._client._json("POST", self._path("/pause"), body, wait=_wait.CHECKPOINT_WAIT)
        )
        self._info = info
        return info

    def resume(self, timeout_seconds: int | None = None) -> SandboxInfo:
        """Boots the paused sandbox where it was, with a lease of
        ``timeout_seconds`` (default: the lease it was last given). Raises
        ConflictError (not paused), UnavailableError, SpendingLimitError (it
        stays paused), SandboxStoppedError (it could not be resumed and was
        destroyed)."""
        body = {"timeoutSeconds": int(timeout_seconds)} if timeout_seconds else {}
        info = SandboxInfo.from_dict(
            self._client._json("POST", self._path("/resume"), body, wait=_wait.CHECKPOINT_WAIT)
        )
        self._info = info
        return info

    def set_timeout(self, seconds: int) -> SandboxInfo:
        """Moves the end of the sandbox's lease to ``seconds`` from now (at
        least 1; the server sets a maximum). Raises BadRequestError,
        LeaseEndedError, SandboxStoppedError."""
        info = SandboxInfo.from_dict(
            self._client._json("POST", self._path("/timeout"), {"timeoutSeconds": int(seconds)})
        )
        self._info = info
        return info

    def metrics(self, from_: _http.When | None = None, to: _http.When | None = None) -> builtins.list[SandboxMetric]:
        """The sandbox's recent resource use, oldest first: a
        :class:`SandboxMetric` per meter interval (5 s by default) of the
        last hour at most, measured on the host, and one taken now when the
        last is older; only those from ``from_`` to ``to`` when given (a
        datetime, a date, or an RFC 3339 or YYYY-MM-DD string). Empty for a
        stopped sandbox. The history lives in the server's memory: a server
        restart begins it again."""
        out = self._client._json("GET", self._path("/metrics"), params=_http.window_params(from_, to))
        return [SandboxMetric.from_dict(m) for m in out.get("metrics") or []]

    def network(self) -> NetworkPolicy:
        """The sandbox's effective (normalized) network policy, as the host
        enforces it now. Raises NotFoundError, ConflictError (still
        starting), LeaseEndedError, SandboxStoppedError."""
        return NetworkPolicy.from_dict(self._client._json("GET", self._path("/network")))

    def set_network(self, policy: _http.NetworkArg) -> NetworkPolicy:
        """Replaces the sandbox's network policy (a
        :class:`~withruntime.NetworkPolicy` or its dict, such as
        ``{"internet": True, "deny": ["example.com"]}``) and returns the
        effective one. It applies to new connections and DNS queries; open
        connections stay open. Raises BadRequestError (an invalid policy;
        the message says what is wrong), LeaseEndedError,
        SandboxStoppedError."""
        body = _http.network_body(policy)
        return NetworkPolicy.from_dict(self._client._json("PUT", self._path("/network"), body))

    def kill(self) -> None:
        """Destroys the sandbox. Safe to call more than once: a sandbox
        already gone (lease ended, destroyed by another client) counts as
        destroyed."""
        with self._lock:
            if self._killed:
                return
            try:
                self._client._send("DELETE", self._path())
            except SandboxGoneError:
                pass
            self._killed = True

    def close(self) -> None:
        """Destroys the sandbox (see :meth:`kill`) and releases the HTTP
        connections the handle opened. The handle is then closed: further
        calls raise SandboxStoppedError. If destroying fails, the error is
        raised and the handle stays open (to retry)."""
        self.kill()
        self._closed = True
        if self._owns_client:
            self._owns_client = False
            self._conn.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            self.close()
            return
        # Do not hide the error that ended the block behind a failed cleanup.
        try:
            self.close()
        except WithRuntimeError:
            pass

    # -- exec --------------------------------------------------------------

    def exec(
        self,
        command: str | Sequence[str] | None = None,
        *,
        argv: Sequence[str] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_seconds: float | None = None,
        max_output_bytes: int | None = None,
        stdin: str | None = None,
        user: str | None = None,
    ) -> ExecResult:
        """Runs a command and returns its collected result.

        ``command`` is a shell command line (``bash -c``), or a list for an
        argv run without a shell. A command that fails is a result, not an
        exception: check ``result.exit_code``. Raises only when the command
        could not be run: BadRequestError (such as a ``cwd`` that does not
        exist, or an argv program not in PATH), LeaseEndedError,
        SandboxStoppedError, TransportError.

        ``timeout_seconds`` kills the command after that long (default 120;
        it then exits 124 with ``timed_out``); ``max_output_bytes`` caps each
        of stdout and stderr (default 1 MiB); ``stdin`` is its standard
        input; ``user`` is ``"user"`` (default) or ``"root"``.
        """
        body = _http.exec_body(
            command,
            argv=argv,
            cwd=cwd,
            env=env,
            timeout_seconds=timeout_seconds,
            max_output_bytes=max_output_bytes,
            stdin=stdin,
            user=user,
        )
        out = self._client._json(
            "POST", self._path("/exec"), body, wait=_wait.run_wait(timeout_seconds, _wait.EXEC_DEFAULT)
        )
        return ExecResult.from_dict(out)

    def run(self, command: str) -> ExecResult:
        """Runs a shell command line with default settings (``exec(command)``)."""
        return self.exec(command)

    def exec_stream(
        self,
        command: str | Sequence[str] | None = None,
        *,
        argv: Sequence[str] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_seconds: float | None = None,
        stdin: str | None = None,
        user: str | None = None,
    ) -> ExecStream:
        """Runs a command and yields its events as they happen: ``start``,
        then ``stdout`` and ``stderr`` chunks, then one ``exit`` event whose
        ``result`` holds the exit code (its stdout and stderr are empty: the
        output went out as events). Output is not capped.

        The command starts when iteration starts. Errors (the command could
        not run, the stream broke) are raised from the iteration. Closing the
        stream early (``with`` block, ``close()``, ``break`` then garbage
        collection) disconnects, which kills the command::

            for ev in sbx.exec_stream("make test"):
                if ev.type == "stdout":
                    sys.stdout.write(ev.data)
                elif ev.type == "exit":
                    print("exit code", ev.result.exit_code)
        """
        body = _http.exec_body(
            command,
            argv=argv,
            cwd=cwd,
            env=env,
            timeout_seconds=timeout_seconds,
            max_output_bytes=None,
            stdin=stdin,
            user=user,
        )
        return ExecStream(self, body)

    def exec_to(
        self,
        command: str | Sequence[str] | None = None,
        *,
        stdout: IO[bytes] | TextIO | None = None,
        stderr: IO[bytes] | TextIO | None = None,
        argv: Sequence[str] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_seconds: float | None = None,
        stdin: str | None = None,
        user: str | None = None,
    ) -> ExecResult:
        """Runs a command, writing its output to ``stdout`` and ``stderr``
        (binary files get the exact bytes, text files the text; None
        discards) as it arrives, and returns the result once it exits."""
        stream = self.exec_stream(
            command, argv=argv, cwd=cwd, env=env, timeout_seconds=timeout_seconds, stdin=stdin, user=user
        )
        with stream:
            for ev in stream:
                w = stdout if ev.type == "stdout" else stderr if ev.type == "stderr" else None
                if w is not None:
                    _exec.write_chunk(w, ev)
        if stream.result is None:  # pragma: no cover - the stream raises first
            raise WithRuntimeError("withruntime: exec stream ended without an exit event")
        return stream.result

    # -- files -------------------------------------------------------------

    @property
    def files(self) -> Files:
        """The sandbox's file API."""
        return Files(self)

    # -- terminals ---------------------------------------------------------

    @property
    def pty(self) -> Pty:
        """The sandbox's terminals (see :mod:`withruntime.terminal`)::

            term = sbx.pty.create(PtySize(cols=80, rows=24), on_data=sys.stdout.buffer.write)
            term.send_input(b"stty size\n")
            term.send_input(b"exit 3\n")
            term.wait().exit_code  # 3
        """
        return Pty(self)

    def _path(self, suffix: str = "") -> str:
        return _http.sandbox_path(self._id, suffix)

    def _sibling(self, info: SandboxInfo) -> Self:
        return type(self)(self._conn, info.id, info)


class ExecStream(Iterator[Event]):
    """The events of one command (see :meth:`Sandbox.exec_stream`): ``for``
    (``async for``) over it. After the exit event, ``result`` is the
    command's ExecResult and ``pid`` its pid. Use ``with`` (``async with``)
    or ``close()`` (``aclose()``) to disconnect early."""

    def __init__(self, sandbox: Sandbox, body: dict[str, Any]) -> None:
        self._sandbox = sandbox
        self._body = body
        self.result: ExecResult | None = None
        self.pid: int | None = None
        self._gen = self._events()

    def _events(self) -> Generator[Event, None]:
        c = self._sandbox._client
        resp = c._send(
            "POST", self._sandbox._path("/exec"), json_body=self._body, accept=_http.NDJSON, stream=True
        )
        try:
            try:
                for line in resp.iter_lines():
                    ev = _exec.event_from_line(line)
                    if ev is None:
                        continue
                    if ev.type == "start":
                        self.pid = ev.pid
                    res = _exec.end_event(ev)
                    if res is not None:
                        self.result = res
                        yield ev
                        return
                    yield ev
            except httpx.HTTPError as e:
                raise _wait.read_error(c.base_url, resp, e, "exec stream broke") from e
        finally:
            resp.close()
        raise WithRuntimeError(
            "withruntime: exec stream ended without an exit event (the sandbox may have been stopped)"
        )

    def __iter__(self) -> ExecStream:
        return self

    def __next__(self) -> Event:
        return self._gen.__next__()

    def wait(self) -> ExecResult:
        """Reads the rest of the stream (dropping its output) and returns the
        result."""
        for _ in self:
            pass
        assert self.result is not None
        return self.result

    def close(self) -> None:
        """Disconnects; a command still running is killed."""
        self._gen.close()

    def __enter__(self) -> ExecStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
