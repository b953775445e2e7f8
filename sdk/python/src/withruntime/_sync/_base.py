# GENERATED from withruntime/_async/_base.py by sdk/python/scripts/generate.sh (unasync); do not edit.
# Change the async source and run sdk/python/scripts/generate.sh to regenerate.
"""What the feature modules (files, code, templates) need of the client and
the sandbox handle, as protocols, so that they import nothing above them:
``_client`` imports the features, never the reverse. ``_sync/_base.py`` is
generated from ``_async/_base.py`` (see _client.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import httpx

from .. import _http

__all__ = ["Transport", "SandboxHandle"]


class Transport(Protocol):
    """The client's requests (see the client's ``_send`` and ``_json``)."""

    base_url: str
    #: The API key (sent on a terminal's WebSocket handshake) and the bound
    #: on waiting for an answer's headers, in seconds (None: no bound).
    _api_key: str
    _response: float | None

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
    ) -> httpx.Response: ...

    def _json(
        self, method: str, path: str, body: Any = None, *, params: Any = None, wait: float = 0.0
    ) -> Any: ...


class SandboxHandle(Protocol):
    """A sandbox handle: its client and its paths."""

    @property
    def _client(self) -> Transport: ...

    def _path(self, suffix: str = "") -> str: ...
