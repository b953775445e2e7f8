"""The code interpreter's methods of :class:`~withruntime.AsyncSandbox` (a
mixin, the asyncio twin of _code_sync.py). Handlers may be plain functions
or coroutine functions."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx

from . import _http, _wait
from . import code as _code
from .code import CodeContext, ErrorHandler, Execution, OutputHandler, ResultHandler

if TYPE_CHECKING:
    from ._async import AsyncClient


class AsyncCodeInterpreterMixin:
    """``run_code`` and the code contexts of an async sandbox."""

    if TYPE_CHECKING:

        @property
        def _client(self) -> AsyncClient: ...

        def _path(self, suffix: str = "") -> str: ...

    async def run_code(
        self,
        code: str,
        *,
        context: CodeContext | str | None = None,
        language: str | None = None,
        timeout_seconds: float | None = None,
        env: Mapping[str, str] | None = None,
        on_stdout: OutputHandler | None = None,
        on_stderr: OutputHandler | None = None,
        on_result: ResultHandler | None = None,
        on_error: ErrorHandler | None = None,
    ) -> Execution:
        """Runs a cell of Python in a context; see :meth:`Sandbox.run_code`."""
        body = _code.run_body(code, context=context, language=language, timeout_seconds=timeout_seconds, env=env)
        if on_stdout is None and on_stderr is None and on_result is None and on_error is None:
            wait = _wait.KERNEL_WAIT + _wait.run_wait(timeout_seconds, _wait.CODE_DEFAULT)
            return Execution.from_dict(await self._client._json("POST", self._path("/code"), body, wait=wait))
        asm = _code.Assembler(on_stdout, on_stderr, on_result, on_error)
        resp = await self._client._send(
            "POST", self._path("/code"), json_body=body, accept=_http.NDJSON, stream=True, wait=_wait.KERNEL_WAIT
        )
        try:
            async for line in resp.aiter_lines():
                aw = _code.maybe_await(asm.feed(line))
                if aw is not None:
                    await aw
                if asm.done:
                    break
        except httpx.HTTPError as e:
            raise _wait.read_error(self._client.base_url, resp, e, "code stream broke") from e
        finally:
            await resp.aclose()
        return asm.finish()

    async def create_code_context(
        self, *, language: str | None = None, cwd: str | None = None, env: Mapping[str, str] | None = None
    ) -> CodeContext:
        """Starts a new context (its own kernel and variables)."""
        out: Any = await self._client._json(
            "POST", self._path("/contexts"), _code.context_body(language, cwd, env), wait=_wait.KERNEL_WAIT
        )
        return CodeContext.from_dict(out)

    async def list_code_contexts(self) -> builtins.list[CodeContext]:
        """The sandbox's contexts, oldest first."""
        out = await self._client._json("GET", self._path("/contexts"))
        return [CodeContext.from_dict(c) for c in out.get("contexts") or []]

    async def restart_code_context(self, context: CodeContext | str) -> CodeContext:
        """Gives the context a new kernel; its variables are lost."""
        cid = _code.context_id(context) or ""
        out = await self._client._json(
            "POST", self._path(f"/contexts/{_http.quote_seg(cid)}/restart"), wait=_wait.KERNEL_WAIT
        )
        return CodeContext.from_dict(out)

    async def remove_code_context(self, context: CodeContext | str) -> None:
        """Stops the context's kernel and forgets the context."""
        cid = _code.context_id(context) or ""
        await self._client._json("DELETE", self._path(f"/contexts/{_http.quote_seg(cid)}"))
