"""The asyncio client: AsyncClient, AsyncSandbox, AsyncFiles,
AsyncExecStream, AsyncFileReader. Same surface as the sync client, with
``await`` (and ``async with`` / ``async for``)."""

from __future__ import annotations

import asyncio
import builtins
import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Mapping, Sequence
from types import TracebackType
from typing import IO, Any, Generic, TextIO, TypeVar

import httpx

from . import _http, _wait
from ._code_async import AsyncCodeInterpreterMixin
from ._config import resolve_config
from ._files_async import AsyncFileReader, AsyncFiles
from ._sync import _check_running, _end_event, _event_from_line, _write_chunk
from .errors import (
    APIError,
    ConflictError,
    SandboxGoneError,
    SandboxStoppedError,
    WithRuntimeError,
)
from .templates import AsyncTemplatesMixin
from .types import (
    Event,
    ExecResult,
    GroupBy,
    KeyInfo,
    NetworkPolicy,
    SandboxInfo,
    SecretInfo,
    UsageReport,
    UsageRow,
)

__all__ = ["AsyncClient", "AsyncSandbox", "AsyncFiles", "AsyncExecStream", "AsyncFileReader"]

T = TypeVar("T")


class AsyncClient(AsyncTemplatesMixin):
    """The asyncio twin of :class:`~withruntime.Client` (an
    ``httpx.AsyncClient`` underneath)."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        response_timeout: float | None = _wait.DEFAULT_RESPONSE_TIMEOUT,
        idle_timeout: float | None = _wait.DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        cfg = resolve_config(base_url, api_key)
        self._response = _wait.check_bound(response_timeout, "response_timeout")
        self._idle = _wait.check_bound(idle_timeout, "idle_timeout")
        self.base_url: str = cfg.base_url
        self._api_key = cfg.api_key
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=_http.DEFAULT_TIMEOUT)

    def __repr__(self) -> str:
        return f"AsyncClient(base_url={self.base_url!r})"

    async def aclose(self) -> None:
        """Closes the HTTP connections (if this client opened them)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def create(
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
    ) -> AsyncSandbox:
        """Creates a sandbox and returns once it runs (see :meth:`withruntime.Sandbox.create`)."""
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
        )
        info = SandboxInfo.from_dict(await self._json("POST", "/v1/sandboxes", body, wait=_wait.BOOT_WAIT))
        return AsyncSandbox(self, info.id, info)

    async def create_and_exec(
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
    ) -> tuple[AsyncSandbox, ExecResult]:
        """Creates a sandbox and runs a command in it, in one request: the
        server runs it as soon as the sandbox is ready. Returns the
        sandbox (kill it when done) and the command's collected result.

        The command takes :meth:`withruntime.Sandbox.exec`'s arguments (its ``env`` and
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
        info, res, err = _http.first_answer(await self._json("POST", "/v1/sandboxes", body, wait=wait))
        sbx = AsyncSandbox(self, str(info["id"]), SandboxInfo.from_dict(info))
        if err is not None:
            err.sandbox = sbx  # type: ignore[attr-defined]
            raise err
        assert res is not None
        return sbx, ExecResult.from_dict(res)

    async def run_once(
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
            sbx, res = await self.create_and_exec(
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
                await made.kill()
            raise
        await sbx.kill()
        return res

    async def connect(self, sandbox_id: str) -> AsyncSandbox:
        """A handle on the sandbox ``sandbox_id``, resumed first if it is
        paused (see :meth:`withruntime.Client.connect`)."""
        sbx = AsyncSandbox(self, sandbox_id)
        info = await sbx.refresh()
        _check_running(info)
        if info.state == "paused":
            try:
                await sbx.resume()
            except ConflictError:
                await sbx.refresh()  # resumed meanwhile by another caller
        return sbx

    async def list(
        self, *, state: str | None = None, metadata: Mapping[str, str] | None = None
    ) -> builtins.list[SandboxInfo]:
        """Lists sandboxes, newest first, filtered by ``state`` and ``metadata``."""
        out = await self._json("GET", "/v1/sandboxes", params=_http.list_params(state, metadata))
        return [SandboxInfo.from_dict(d) for d in out.get("sandboxes") or []]

    # -- secrets, keys, usage: see the sync Client for the details ---------

    async def set_secret(self, name: str, value: str, hosts: Sequence[str]) -> SecretInfo:
        """Stores (or replaces) a write-only secret for ``hosts`` and returns
        its description, without the value (see
        :meth:`withruntime.Client.set_secret`). Raises BadRequestError,
        UnauthorizedError."""
        return SecretInfo.from_dict(await self._json("POST", "/v1/secrets", _http.secret_body(name, value, hosts)))

    async def list_secrets(self) -> builtins.list[SecretInfo]:
        """The stored secrets by name, with their hosts; never their values."""
        out = await self._json("GET", "/v1/secrets")
        return [SecretInfo.from_dict(d) for d in out.get("secrets") or []]

    async def delete_secret(self, name: str) -> None:
        """Deletes a stored secret. Raises NotFoundError (no such secret)."""
        await self._send("DELETE", _http.secret_path(name))

    async def create_key(self, name: str, daily_limit_micros: int | None = None) -> KeyInfo:
        """Creates an API key and returns it with its ``secret``, shown this
        once; ``daily_limit_micros`` caps its sandboxes' cost per UTC day in
        micro-dollars (see :meth:`withruntime.Client.create_key`). Raises
        BadRequestError, UnauthorizedError."""
        return KeyInfo.from_dict(await self._json("POST", "/v1/keys", _http.key_body(name, daily_limit_micros)))

    async def list_keys(self) -> builtins.list[KeyInfo]:
        """Every API key, revoked ones included, oldest first, without secrets."""
        out = await self._json("GET", "/v1/keys")
        return [KeyInfo.from_dict(d) for d in out.get("keys") or []]

    async def revoke_key(self, key_id: str) -> None:
        """Revokes the live key ``key_id`` (``key_...``). Raises
        NotFoundError, ConflictError (the key this client authenticates with)."""
        await self._send("DELETE", _http.key_path(key_id))

    async def usage(
        self,
        from_: _http.When | None = None,
        to: _http.When | None = None,
        group_by: GroupBy | None = None,
    ) -> builtins.list[UsageRow]:
        """Usage rows (CPU-seconds, GiB-seconds, micro-dollars) per day,
        sandbox or key in the window (see :meth:`withruntime.Client.usage`).
        Raises BadRequestError."""
        return (await self.usage_report(from_, to, group_by)).rows

    async def usage_report(
        self,
        from_: _http.When | None = None,
        to: _http.When | None = None,
        group_by: GroupBy | None = None,
    ) -> UsageReport:
        """The whole usage report: window, prices, rows and total."""
        out = await self._json("GET", "/v1/usage", params=_http.usage_params(from_, to, group_by))
        return UsageReport.from_dict(out)

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
    ) -> httpx.Response:
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
            resp = await self._http.send(req, stream=True)
        except httpx.HTTPError as e:
            raise _wait.send_error(self.base_url, req, e) from e
        if resp.status_code >= 400:
            try:
                data = await resp.aread()
            except httpx.HTTPError:
                data = b""
            finally:
                await resp.aclose()
            raise _http.decode_error(resp.status_code, resp.reason_phrase, data)
        if stream:
            _wait.after_headers(resp, self._idle)
        if not stream:
            try:
                await resp.aread()
            except httpx.HTTPError as e:
                raise _wait.read_error(self.base_url, resp, e, f"reading the answer to {method} {path}") from e
            finally:
                await resp.aclose()
        return resp

    async def _json(self, method: str, path: str, body: Any = None, *, params: Any = None, wait: float = 0.0) -> Any:
        resp = await self._send(method, path, params=params, json_body=body, wait=wait)
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError as e:
            raise WithRuntimeError(f"withruntime: decoding the answer to {method} {path}: {e}") from e


class _AwaitableContext(Generic[T]):
    """What AsyncSandbox.create and connect return: await it for the
    sandbox, or use it directly in ``async with``."""

    def __init__(self, make: Callable[[], Awaitable[T]]) -> None:
        self._make = make
        self._value: T | None = None

    def __await__(self) -> Generator[Any, None, T]:
        return self._make().__await__()

    async def __aenter__(self) -> T:
        self._value = await self._make()
        return await self._value.__aenter__()  # type: ignore[attr-defined,no-any-return]

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._value is not None
        await self._value.__aexit__(exc_type, exc, tb)  # type: ignore[attr-defined]


class AsyncSandbox(AsyncCodeInterpreterMixin):
    """The asyncio twin of :class:`~withruntime.Sandbox`::

        async with AsyncSandbox.create(timeout_seconds=600) as sbx:
            res = await sbx.exec("python3 -c 'print(6*7)'")

    (``sbx = await AsyncSandbox.create(...)`` works too; then ``await
    sbx.kill()`` when done.)
    """

    def __init__(
        self, client: AsyncClient, sandbox_id: str, info: SandboxInfo | None = None, *, _owns_client: bool = False
    ) -> None:
        self._conn = client
        self._id = sandbox_id
        self._info = info
        self._owns_client = _owns_client
        self._closed = False
        self._lock = asyncio.Lock()
        self._killed = False

    @classmethod
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
        client: AsyncClient | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> _AwaitableContext[AsyncSandbox]:
        """Creates a sandbox (see :meth:`withruntime.Sandbox.create`). Await
        the answer, or use it in ``async with``."""

        async def make() -> AsyncSandbox:
            owns = client is None
            c = client or AsyncClient(base_url, api_key)
            try:
                sbx = await c.create(
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
                )
            except BaseException:
                if owns:
                    await c.aclose()
                raise
            sbx._owns_client = owns
            return sbx

        return _AwaitableContext(make)

    @classmethod
    def connect(
        cls,
        sandbox_id: str,
        *,
        client: AsyncClient | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> _AwaitableContext[AsyncSandbox]:
        """A handle on an existing sandbox, resumed first if it is paused
        (await it, or ``async with``)."""

        async def make() -> AsyncSandbox:
            owns = client is None
            c = client or AsyncClient(base_url, api_key)
            try:
                sbx = await c.connect(sandbox_id)
            except BaseException:
                if owns:
                    await c.aclose()
                raise
            sbx._owns_client = owns
            return sbx

        return _AwaitableContext(make)

    @classmethod
    async def list(
        cls,
        *,
        state: str | None = None,
        metadata: Mapping[str, str] | None = None,
        client: AsyncClient | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> builtins.list[SandboxInfo]:
        """Lists sandboxes (newest first), filtered by ``state`` and ``metadata``."""
        if client is not None:
            return await client.list(state=state, metadata=metadata)
        async with AsyncClient(base_url, api_key) as c:
            return await c.list(state=state, metadata=metadata)

    @property
    def _client(self) -> AsyncClient:
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
        return self._id

    @property
    def sandbox_id(self) -> str:
        return self._id

    @property
    def client(self) -> AsyncClient:
        return self._conn

    @property
    def info(self) -> SandboxInfo | None:
        return self._info

    def __repr__(self) -> str:
        state = self._info.state if self._info else "?"
        return f"AsyncSandbox(id={self._id!r}, state={state!r})"

    async def refresh(self) -> SandboxInfo:
        info = SandboxInfo.from_dict(await self._client._json("GET", self._path()))
        self._info = info
        return info

    async def pause(self) -> SandboxInfo:
        """Saves the sandbox whole and stops it (see
        :meth:`withruntime.Sandbox.pause`)."""
        info = SandboxInfo.from_dict(await self._client._json("POST", self._path("/pause"), wait=_wait.CHECKPOINT_WAIT))
        self._info = info
        return info

    async def resume(self, timeout_seconds: int | None = None) -> SandboxInfo:
        """Boots the paused sandbox where it was (see
        :meth:`withruntime.Sandbox.resume`)."""
        body = {"timeoutSeconds": int(timeout_seconds)} if timeout_seconds else {}
        info = SandboxInfo.from_dict(
            await self._client._json("POST", self._path("/resume"), body, wait=_wait.CHECKPOINT_WAIT)
        )
        self._info = info
        return info

    async def set_timeout(self, seconds: int) -> SandboxInfo:
        info = SandboxInfo.from_dict(
            await self._client._json("POST", self._path("/timeout"), {"timeoutSeconds": int(seconds)})
        )
        self._info = info
        return info

    async def network(self) -> NetworkPolicy:
        """The sandbox's effective network policy (see
        :meth:`withruntime.Sandbox.network`)."""
        return NetworkPolicy.from_dict(await self._client._json("GET", self._path("/network")))

    async def set_network(self, policy: _http.NetworkArg) -> NetworkPolicy:
        """Replaces the sandbox's network policy and returns the effective
        one (see :meth:`withruntime.Sandbox.set_network`). Raises
        BadRequestError (an invalid policy), LeaseEndedError,
        SandboxStoppedError."""
        body = _http.network_body(policy)
        return NetworkPolicy.from_dict(await self._client._json("PUT", self._path("/network"), body))

    async def kill(self) -> None:
        """Destroys the sandbox; safe to call more than once."""
        async with self._lock:
            if self._killed:
                return
            try:
                await self._client._send("DELETE", self._path())
            except SandboxGoneError:
                pass
            self._killed = True

    async def close(self) -> None:
        """Destroys the sandbox and releases the HTTP connections the handle opened."""
        await self.kill()
        self._closed = True
        if self._owns_client:
            self._owns_client = False
            await self._conn.aclose()

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            await self.close()
            return
        try:
            await self.close()
        except WithRuntimeError:
            pass

    async def exec(
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
        """Runs a command and returns its collected result (a non-zero exit
        code is a result, not an exception)."""
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
        return ExecResult.from_dict(
            await self._client._json(
                "POST", self._path("/exec"), body, wait=_wait.run_wait(timeout_seconds, _wait.EXEC_DEFAULT)
            )
        )

    async def run(self, command: str) -> ExecResult:
        return await self.exec(command)

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
    ) -> AsyncExecStream:
        """Runs a command and yields its events (``async for``); see
        :meth:`withruntime.Sandbox.exec_stream`."""
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
        return AsyncExecStream(self, body)

    async def exec_to(
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
        """Runs a command, writing its output to ``stdout``/``stderr`` as it
        arrives, and returns the result."""
        stream = self.exec_stream(
            command, argv=argv, cwd=cwd, env=env, timeout_seconds=timeout_seconds, stdin=stdin, user=user
        )
        async with stream:
            async for ev in stream:
                w = stdout if ev.type == "stdout" else stderr if ev.type == "stderr" else None
                if w is not None:
                    _write_chunk(w, ev)
        if stream.result is None:  # pragma: no cover
            raise WithRuntimeError("withruntime: exec stream ended without an exit event")
        return stream.result

    @property
    def files(self) -> AsyncFiles:
        return AsyncFiles(self)

    def _path(self, suffix: str = "") -> str:
        return _http.sandbox_path(self._id, suffix)


class AsyncExecStream:
    """The events of one command, for ``async for``; ``result`` after the
    exit event. Use ``async with`` (or ``aclose()``) to disconnect early."""

    def __init__(self, sandbox: AsyncSandbox, body: dict[str, Any]) -> None:
        self._sandbox = sandbox
        self._body = body
        self.result: ExecResult | None = None
        self.pid: int | None = None
        self._gen = self._events()

    async def _events(self) -> AsyncGenerator[Event, None]:
        c = self._sandbox._client
        resp = await c._send(
            "POST", self._sandbox._path("/exec"), json_body=self._body, accept=_http.NDJSON, stream=True
        )
        try:
            try:
                async for line in resp.aiter_lines():
                    ev = _event_from_line(line)
                    if ev is None:
                        continue
                    if ev.type == "start":
                        self.pid = ev.pid
                    res = _end_event(ev)
                    if res is not None:
                        self.result = res
                        yield ev
                        return
                    yield ev
            except httpx.HTTPError as e:
                raise _wait.read_error(c.base_url, resp, e, "exec stream broke") from e
        finally:
            await resp.aclose()
        raise WithRuntimeError(
            "withruntime: exec stream ended without an exit event (the sandbox may have been stopped)"
        )

    def __aiter__(self) -> AsyncExecStream:
        return self

    async def __anext__(self) -> Event:
        return await self._gen.__anext__()

    async def wait(self) -> ExecResult:
        async for _ in self:
            pass
        assert self.result is not None
        return self.result

    async def aclose(self) -> None:
        await self._gen.aclose()

    async def __aenter__(self) -> AsyncExecStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
