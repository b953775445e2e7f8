# GENERATED from withruntime/_async/_code.py by sdk/python/scripts/generate.sh (unasync); do not edit.
# Change the async source and run sdk/python/scripts/generate.sh to regenerate.
"""The code interpreter's methods of :class:`~withruntime.Sandbox` and
:class:`~withruntime.AsyncSandbox` (a mixin, so that _client.py stays about
commands and files). The async one's handlers may be plain functions or
coroutine functions. ``_sync/_code.py`` is generated from ``_async/_code.py`` (see _client.py)."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

import httpx

from .. import _http, _wait
from .. import _io_sync as _io
from .. import code as _code
from ..code import CodeContext, ErrorHandler, Execution, OutputHandler, ResultHandler
from ._base import SandboxHandle


class CodeInterpreterMixin(SandboxHandle):
    """``run_code`` and the code contexts of a sandbox."""

    def run_code(
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
        """Runs a cell of code in a context (a Jupyter kernel that keeps
        its variables between calls) and returns its :class:`Execution`:
        ``.text`` (the cell's value), ``.results`` (rich outputs: charts as
        ``png``, DataFrames as ``html``...), ``.logs`` and ``.error``.

        The sandbox must be of the ``code-interpreter`` template (others
        raise UnsupportedError). ``context`` (a CodeContext or its id) picks
        the context; default, the sandbox's default one. An exception in the
        code is not raised: it is ``.error``. ``timeout_seconds`` (default
        300) interrupts the code and keeps the context; ``env`` is set for
        this call only. ``language`` is ``"python"`` (the default),
        ``"javascript"`` (``"js"``), ``"typescript"`` (``"ts"``), ``"r"`` or
        ``"bash"``: without a context the cell runs in that language's
        default context (a language without a kernel raises
        BadRequestError). The handlers, when given, are called as output
        arrives (the answer is then streamed)::

            ex = sbx.run_code("import pandas as pd; df = pd.DataFrame({'a': [1, 2]}); df.a.sum()")
            ex.text  # '3'
            ex = sbx.run_code("df.plot()", on_stdout=print)
            png = ex.results[0].png_bytes()
        """
        body = _code.run_body(code, context=context, language=language, timeout_seconds=timeout_seconds, env=env)
        if on_stdout is None and on_stderr is None and on_result is None and on_error is None:
            wait = _wait.KERNEL_WAIT + _wait.run_wait(timeout_seconds, _wait.CODE_DEFAULT)
            return Execution.from_dict(self._client._json("POST", self._path("/code"), body, wait=wait))
        asm = _code.Assembler(on_stdout, on_stderr, on_result, on_error)
        resp = self._client._send(
            "POST", self._path("/code"), json_body=body, accept=_http.NDJSON, stream=True, wait=_wait.KERNEL_WAIT
        )
        try:
            for line in resp.iter_lines():
                _io.resolve(asm.feed(line))
                if asm.done:
                    break
        except httpx.HTTPError as e:
            raise _wait.read_error(self._client.base_url, resp, e, "code stream broke") from e
        finally:
            resp.close()
        return asm.finish()

    def create_code_context(
        self,
        *,
        language: str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
    ) -> CodeContext:
        """Starts a new context (its own kernel and variables) and returns it
        once it is ready; pass it to ``run_code(context=...)``. ``language``
        is ``"python"`` (the default), ``"javascript"``, ``"typescript"``,
        ``"r"`` or ``"bash"``. ``user`` is
        who the kernel runs as, ``"user"`` (the default) or ``"root"``; the
        ``cwd`` must be a directory that user can enter."""
        out: Any = self._client._json(
            "POST", self._path("/contexts"), _code.context_body(language, cwd, env, user), wait=_wait.KERNEL_WAIT
        )
        return CodeContext.from_dict(out)

    def list_code_contexts(self) -> builtins.list[CodeContext]:
        """The sandbox's contexts, oldest first."""
        out = self._client._json("GET", self._path("/contexts"))
        return [CodeContext.from_dict(c) for c in out.get("contexts") or []]

    def restart_code_context(self, context: CodeContext | str) -> CodeContext:
        """Gives the context a new kernel; its variables are lost."""
        cid = _code.context_id(context) or ""
        out = self._client._json(
            "POST", self._path(f"/contexts/{_http.quote_seg(cid)}/restart"), wait=_wait.KERNEL_WAIT
        )
        return CodeContext.from_dict(out)

    def remove_code_context(self, context: CodeContext | str) -> None:
        """Stops the context's kernel and forgets the context."""
        cid = _code.context_id(context) or ""
        self._client._json("DELETE", self._path(f"/contexts/{_http.quote_seg(cid)}"))
