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

Usage: ``python scripts/generate.py`` (rewrites ``_sync/``) or ``python
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
    "AsyncOnTemplateEvent": "OnTemplateEvent",
    "AsyncUploadSource": "UploadSource",
    "_io_async": "_io_sync",
    "aclose": "close",
    "aread": "read",
    "aiter_lines": "iter_lines",
    "aiter_bytes": "iter_bytes",
}

HEADER = (
    "# GENERATED from withruntime/_async/{name} by {command} (unasync); do not edit.\n"
    "# Change the async source and run {command} to regenerate.\n"
)


def generate(source: Path = SOURCE) -> dict[str, str]:
    """The generated sync modules, by file name, from the async ones in ``source``."""
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp) / "_async"
        stage.mkdir()
        files = []
        for src in sorted(source.glob("*.py")):
            shutil.copyfile(src, stage / src.name)
            files.append(str(stage / src.name))
        unasync.unasync_files(files, [unasync.Rule("/_async/", "/_sync/", additional_replacements=REPLACEMENTS)])
        for f in sorted((Path(tmp) / "_sync").glob("*.py")):
            out[f.name] = HEADER.format(name=f.name, command=COMMAND) + f.read_text(encoding="utf-8")
    return out


def stale(target: Path = TARGET, source: Path = SOURCE) -> list[str]:
    """The files of ``target`` that differ from what ``source`` gives (or are
    missing from it, or have no source)."""
    want = generate(source)
    have = {f.name: f.read_text(encoding="utf-8") for f in target.glob("*.py")} if target.is_dir() else {}
    return sorted(n for n in want.keys() | have.keys() if want.get(n) != have.get(n))


def write(target: Path = TARGET, source: Path = SOURCE) -> None:
    """Rewrites ``target`` with the generated modules."""
    target.mkdir(exist_ok=True)
    want = generate(source)
    for f in target.glob("*.py"):
        if f.name not in want:
            f.unlink()
    for name, text in want.items():
        (target / name).write_text(text, encoding="utf-8")


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
