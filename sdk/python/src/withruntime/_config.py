"""Finding the Runtime server: arguments, then the environment, then the
CLI's config file (the same order as the Go SDK's NewClient)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import NotConfiguredError, WithRuntimeError

#: The environment variable that names the server's base URL.
ENV_URL = "WITHRUNTIME_URL"
#: The environment variable that holds the API key (``wr_...``).
ENV_API_KEY = "WITHRUNTIME_API_KEY"
#: The CLI's config file, relative to the user's config directory.
CONFIG_FILE = "withruntime/config.json"


@dataclass(frozen=True)
class Config:
    base_url: str
    api_key: str


def config_path() -> Path:
    """``$XDG_CONFIG_HOME/withruntime/config.json``, else
    ``~/.config/withruntime/config.json``."""
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / CONFIG_FILE


def _first(*values: str | None) -> str:
    for v in values:
        if v:
            return v
    return ""


def resolve_config(base_url: str | None = None, api_key: str | None = None) -> Config:
    """Returns the server to use: ``base_url`` (with ``api_key``), else
    ``WITHRUNTIME_URL`` (with ``api_key`` or ``WITHRUNTIME_API_KEY``), else
    the config file ``{"url", "apiKey"}``. Raises :class:`NotConfiguredError`,
    saying how to configure one, when there is none."""
    url = base_url or ""
    key = api_key or ""
    if not url:
        env_url = os.environ.get(ENV_URL, "")
        if env_url:
            url = env_url
            key = _first(key, os.environ.get(ENV_API_KEY))
        else:
            path = config_path()
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                text = None
            except OSError as e:
                raise WithRuntimeError(f"withruntime: reading config file {path}: {e}") from e
            if text is not None:
                try:
                    fc = json.loads(text)
                    if not isinstance(fc, dict):
                        raise ValueError("not a JSON object")
                except ValueError as e:
                    raise WithRuntimeError(f"withruntime: config file {path} is not valid JSON: {e}") from e
                if fc.get("url"):
                    url = str(fc["url"])
                    key = _first(key, os.environ.get(ENV_API_KEY), str(fc.get("apiKey") or ""))
            if not url:
                raise NotConfiguredError(
                    "withruntime: no Runtime server configured: "
                    f"set {ENV_URL} (and {ENV_API_KEY}) to a server's URL and key, "
                    f'write {path} as {{"url": ..., "apiKey": ...}}, '
                    "or pass base_url= and api_key=; "
                    "to run a server on this host: `sudo withruntime serve --listen 127.0.0.1:7780`, "
                    "then `sudo withruntime keys create NAME` for a key "
                    f"(and export {ENV_URL}=http://127.0.0.1:7780 {ENV_API_KEY}=wr_...)"
                )
    if not (url.startswith("http://") or url.startswith("https://")):
        raise WithRuntimeError(f"withruntime: server URL {url!r} must start with http:// or https://")
    return Config(base_url=url.rstrip("/"), api_key=key)
