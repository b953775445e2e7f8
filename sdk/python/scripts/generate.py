"""Generates the sync client (``src/withruntime/_sync/``) from the async one
(``src/withruntime/_async/``), the way httpcore does: the async code is the
only one written by hand, and unasync rewrites it token by token (``async``
and ``await`` dropped, ``async with``/``async for`` made plain, ``Async``
names made plain, and the names below).

Why unasync: its output is the input less the async words, line for line,
so the generated file reads like the source and a diff of the two is only
the async words; it is what httpcore (and the urllib3/elasticsearch clients)
use. unasyncd (libcst) also rewrites docstrings, but it rewrote imports and
``__all__`` in ways we would have to fix after it. What the two clients do
differently (a download's reader, locks, awaiting a handler's answer,
worker threads) lives in the hand-written ``_io_async.py`` and
``_io_sync.py``, which have the same names: the source imports
``_io_async as _io``, and the sync copy imports ``_io_sync as _io``.

The same goes for the tools' runner (``tools/_runner_async.py`` ->
``tools/_runner_sync.py``).

Usage: ``python scripts/generate.py`` (rewrites ``_sync/`` and the runner) or ``python
scripts/generate.py --check`` (exits 1 when ``_sync/`` is not what the
source gives); ``scripts/generate.sh`` runs the first.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import unasync

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent / "src" / "withruntime"
SOURCE = PACKAGE / "_async"
TARGET = PACKAGE / "_sync"

#: The command that regenerates everything of the Python SDK.
COMMAND = "sdk/python/scripts/generate.sh"

#: Names unasync changes beyond its own (``__aenter__``, ``AsyncIterator``, ...).
REPLACEMENTS = {
    "AsyncClient": "Client",  # ours, and httpx.AsyncClient -> httpx.Client
    "AsyncSandbox": "Sandbox",
    "AsyncExecStream": "ExecStream",
    "AsyncFiles": "Files",
    "AsyncFileReader": "FileReader",
    "AsyncCodeInterpreterMixin": "CodeInterpreterMixin",
    "AsyncTransport": "Transport",
    "AsyncSandboxHandle": "SandboxHandle",
    "AsyncTemplatesMixin": "TemplatesMixin",
    "AsyncSnapshotsMixin": "SnapshotsMixin",
    "AsyncSandboxSnapshotsMixin": "SandboxSnapshotsMixin",
    "AsyncForkResult": "ForkResult",
    "AsyncFileTransfer": "FileTransfer",
    "AsyncFileWatch": "FileWatch",
    "AsyncVolumeFiles": "VolumeFiles",
    "AsyncVolumesMixin": "VolumesMixin",
    "AsyncOnTemplateEvent": "OnTemplateEvent",
    "AsyncUploadSource": "UploadSource",
    "AsyncPty": "Pty",
    "AsyncTerminal": "Terminal",
    "_io_async": "_io_sync",
    "_async": "_sync",  # from .._async import AsyncSandbox -> from .._sync import Sandbox
    "aclose": "close",
    "aread": "read",
    "aiter_lines": "iter_lines",
    "aiter_bytes": "iter_bytes",
}

HEADER = (
    "# GENERATED from withruntime/{name} by {command} (unasync); do not edit.\n"
    "# Change the async source and run {command} to regenerate.\n"
)


#: What is generated: each hand-written async module (relative to the
#: package) and the sync module made from it.
JOBS = {
    **{f"_async/{p.name}": f"_sync/{p.name}" for p in sorted(SOURCE.glob("*.py"))},
    "tools/_runner_async.py": "tools/_runner_sync.py",
}


def generate(package: Path = PACKAGE) -> dict[str, str]:
    """The generated sync modules, by path relative to the package, from the
    async ones in ``package``."""
    out: dict[str, str] = {}
    rule = unasync.Rule("/_async/", "/_sync/", additional_replacements=REPLACEMENTS)
    with tempfile.TemporaryDirectory() as tmp:
        for src, dst in JOBS.items():
            # unasync maps a file's directory /_async/ to /_sync/: stage each
            # source under that name and read the answer back.
            stage = Path(tmp) / src.replace("/", "__") / "_async"
            stage.mkdir(parents=True)
            shutil.copyfile(package / src, stage / "m.py")
            unasync.unasync_files([str(stage / "m.py")], [rule])
            text = (stage.parent / "_sync" / "m.py").read_text(encoding="utf-8")
            out[dst] = HEADER.format(name=src, command=COMMAND) + text
    return out


def stale(target: Path = PACKAGE, package: Path = PACKAGE) -> list[str]:
    """The generated files under ``target`` that differ from what the
    sources in ``package`` give (or are missing), and files in ``target``'s
    ``_sync/`` that no source gives."""
    want = generate(package)
    have = {dst: (target / dst).read_text(encoding="utf-8") for dst in want if (target / dst).exists()}
    extra = [f"_sync/{f.name}" for f in (target / "_sync").glob("*.py") if f"_sync/{f.name}" not in want]
    return sorted([d for d in want if want[d] != have.get(d)] + extra)


def write(target: Path = PACKAGE, package: Path = PACKAGE) -> None:
    """Writes the generated modules under ``target``, removing modules of
    its ``_sync/`` that no source gives."""
    want = generate(package)
    (target / "_sync").mkdir(parents=True, exist_ok=True)
    for f in (target / "_sync").glob("*.py"):
        if f"_sync/{f.name}" not in want:
            f.unlink()
    for dst, text in want.items():
        (target / dst).parent.mkdir(parents=True, exist_ok=True)
        (target / dst).write_text(text, encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only say whether _sync/ is current")
    args = ap.parse_args()
    if args.check:
        bad = stale()
        if bad:
            print(f"withruntime/_sync is not current ({', '.join(bad)}): run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
