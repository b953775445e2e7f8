# GENERATED from withruntime/_async/__init__.py by sdk/python/scripts/generate.sh (unasync); do not edit.
# Change the async source and run sdk/python/scripts/generate.sh to regenerate.
"""The client, one package per flavour: ``withruntime/_async`` (AsyncClient,
AsyncSandbox, ...) is written by hand; ``withruntime/_sync`` (Client,
Sandbox, ...) is generated from it by ``sdk/python/scripts/generate.sh``.

Modules, bottom to top: ``_base`` (what the features need of the
client, as protocols), ``_files`` (the file API), ``_code`` (the code
interpreter's methods), ``_templates`` (the template methods), then
``_watch`` (a file watch) under ``_files``, ``_volumes`` (volumes and their
files) over it, ``_pty`` (terminals), ``_snapshots`` (snapshots and fork), then ``_client`` (the client, the sandbox
handle and the exec stream), which uses them."""

from .._io_sync import FileReader
from ._client import Client, ExecStream, Sandbox
from ._code import CodeInterpreterMixin
from ._files import Files, FileTransfer
from ._pty import Pty, Terminal
from ._snapshots import ForkResult, SandboxSnapshotsMixin, SnapshotsMixin
from ._templates import TemplatesMixin
from ._volumes import VolumeFiles, VolumesMixin
from ._watch import FileWatch

__all__ = [
    "Client",
    "Sandbox",
    "Files",
    "ExecStream",
    "FileReader",
    "CodeInterpreterMixin",
    "TemplatesMixin",
    "Pty",
    "Terminal",
    "ForkResult",
    "SnapshotsMixin",
    "SandboxSnapshotsMixin",
    "FileTransfer",
    "FileWatch",
    "VolumeFiles",
    "VolumesMixin",
]
