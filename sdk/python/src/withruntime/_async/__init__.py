"""The client, one package per flavour: ``withruntime/_async`` (AsyncClient,
AsyncSandbox, ...) is written by hand; ``withruntime/_sync`` (Client,
Sandbox, ...) is generated from it by ``sdk/python/scripts/generate.sh``.

Modules, bottom to top: ``_base`` (what the features need of the
client, as protocols), ``_files`` (the file API), ``_code`` (the code
interpreter's methods), ``_templates`` (the template methods), then
``_watch`` (a file watch) under ``_files``, ``_volumes`` (volumes and their
files) over it, ``_pty`` (terminals), ``_snapshots`` (snapshots and fork), then ``_client`` (the client, the sandbox
handle and the exec stream), which uses them."""

from .._io_async import AsyncFileReader
from ._client import AsyncClient, AsyncExecStream, AsyncSandbox
from ._code import AsyncCodeInterpreterMixin
from ._files import AsyncFiles, AsyncFileTransfer
from ._pty import AsyncPty, AsyncTerminal
from ._snapshots import AsyncForkResult, AsyncSandboxSnapshotsMixin, AsyncSnapshotsMixin
from ._templates import AsyncTemplatesMixin
from ._volumes import AsyncVolumeFiles, AsyncVolumesMixin
from ._watch import AsyncFileWatch

__all__ = [
    "AsyncClient",
    "AsyncSandbox",
    "AsyncFiles",
    "AsyncExecStream",
    "AsyncFileReader",
    "AsyncCodeInterpreterMixin",
    "AsyncTemplatesMixin",
    "AsyncPty",
    "AsyncTerminal",
    "AsyncForkResult",
    "AsyncSnapshotsMixin",
    "AsyncSandboxSnapshotsMixin",
    "AsyncFileTransfer",
    "AsyncFileWatch",
    "AsyncVolumeFiles",
    "AsyncVolumesMixin",
]
