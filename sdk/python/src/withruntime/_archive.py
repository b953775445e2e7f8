"""What a template upload reads on this machine: an OCI image layout,
sent as a `docker save` tarball, and a Dockerfile's build context, sent as
a tar less what its ``.dockerignore`` excludes. Both are streams of byte
chunks, read from disk as they are sent."""

from __future__ import annotations

import json
import os
import posixpath
import re
import stat
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _http
from .errors import WithRuntimeError, api_error

#: Where a Dockerfile from outside the build context goes in the context's
#: tar; the server's COPY and ADD leave it out.
CONTEXT_DOCKERFILE = ".withruntime.Dockerfile"
#: The most an OCI layout's index or manifest may be, in bytes.
_MAX_LAYOUT_JSON = 4 << 20
_DIGEST = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+")
_INDEX_TYPES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")
_MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json")
_BLOCK = 512


def not_found(msg: str) -> WithRuntimeError:
    """A NotFoundError about something on this machine."""
    return api_error(404, "not_found", msg)


def bad(msg: str) -> WithRuntimeError:
    """A BadRequestError about something on this machine."""
    return api_error(400, "bad_request", msg)


# -- tar streams ------------------------------------------------------------


def _header(info: tarfile.TarInfo) -> bytes:
    return info.tobuf(format=tarfile.PAX_FORMAT, encoding="utf-8", errors="surrogateescape")


def _pad(size: int) -> bytes:
    return b"\0" * (-size % _BLOCK)


def _file_entry(path: str, info: tarfile.TarInfo) -> Iterator[bytes]:
    """A regular file's header, its ``info.size`` bytes and padding."""
    with open(path, "rb") as f:
        yield _header(info)
        left = info.size
        while left > 0:
            chunk = f.read(min(_http.CHUNK_SIZE, left))
            if not chunk:
                raise WithRuntimeError(f"withruntime: {path} shrank while it was read")
            left -= len(chunk)
            yield chunk
    yield _pad(info.size)


def _bytes_entry(name: str, data: bytes) -> Iterator[bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    yield _header(info)
    yield data
    yield _pad(len(data))


def _end() -> bytes:
    return b"\0" * (2 * _BLOCK)


# -- OCI layouts --------------------------------------------------------------


def _read_json(path: Path, ref: str) -> Any:
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_LAYOUT_JSON + 1)
    except FileNotFoundError as e:
        raise not_found(f"image {ref}: {e}") from e
    try:
        return json.loads(data)
    except ValueError as e:
        raise bad(f"image {ref}: {path.name} is not valid JSON: {e}") from e


def _blob(layout: Path, ref: str, digest: Any) -> str:
    """The name of digest's blob in the layout, ``blobs/ALG/ENCODED``,
    checked to be a regular file."""
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise bad(f"image {ref}: {digest!r} is not a digest")
    alg, enc = digest.split(":", 1)
    name = f"blobs/{alg}/{enc}"
    try:
        st = os.stat(layout / name)
    except FileNotFoundError as e:
        raise not_found(f"image {ref}: blob {digest}: {e}") from e
    if not stat.S_ISREG(st.st_mode):
        raise bad(f"image {ref}: blob {digest} is not a regular file")
    return name


def _pick_manifest(layout: Path, ref: str, index: Any, depth: int = 0) -> Mapping[str, Any]:
    if depth > 4:
        raise bad(f"image {ref}: indexes nested too deep")
    manifests = index.get("manifests") if isinstance(index, Mapping) else None
    others: list[str] = []
    unlabelled: list[Mapping[str, Any]] = []
    for d in manifests or []:
        if not isinstance(d, Mapping):
            continue
        mt = d.get("mediaType")
        plat = d.get("platform") if isinstance(d.get("platform"), Mapping) else None
        if mt in _INDEX_TYPES:
            child = _read_json(layout / _blob(layout, ref, d.get("digest")), ref)
            try:
                return _pick_manifest(layout, ref, child, depth + 1)
            except WithRuntimeError as e:
                others.append(f"(a nested index: {e})")
        elif mt not in _MANIFEST_TYPES:
            continue
        elif plat is None:
            unlabelled.append(d)
        elif plat.get("os") == "linux" and plat.get("architecture") == "amd64":
            return d
        elif plat.get("os") != "unknown":  # "unknown": buildx attestations
            others.append(f"{plat.get('os')}/{plat.get('architecture')}")
    if len(unlabelled) == 1 and not others:
        return unlabelled[0]
    if others:
        raise bad(
            f"image {ref} has no linux/amd64 variant (it has: {', '.join(others)}); "
            "Runtime runs linux/amd64 images only"
        )
    if not unlabelled:
        raise bad(f"image {ref}: the layout's index holds no image")
    raise bad(f"image {ref}: the layout's index holds {len(unlabelled)} images without a platform; keep one")


def oci_layout_archive(layout_dir: str, ref: str) -> Iterator[bytes]:
    """Checks the OCI image layout ``layout_dir`` and returns its linux/amd64
    image as a `docker save` tarball, a stream of byte chunks (the blobs
    are read as it is consumed, never whole)."""
    layout = Path(layout_dir)
    if not (layout / "oci-layout").exists():
        raise bad(
            f"image {ref}: {layout_dir} has no oci-layout file, so it is not an OCI image layout "
            "(make one with `skopeo copy ... oci:DIR` or `crane pull --format=oci`)"
        )
    desc = _pick_manifest(layout, ref, _read_json(layout / "index.json", ref))
    manifest = _read_json(layout / _blob(layout, ref, desc.get("digest")), ref)
    if not isinstance(manifest, Mapping) or not isinstance(manifest.get("config"), Mapping):
        raise bad(f"image {ref}: its manifest has no config")
    config = _blob(layout, ref, manifest["config"].get("digest"))
    layers = [
        _blob(layout, ref, ly.get("digest") if isinstance(ly, Mapping) else None) for ly in manifest.get("layers") or []
    ]
    if not layers:
        raise bad(f"image {ref} has no layers")
    index = json.dumps([{"Config": config, "RepoTags": [], "Layers": layers}]).encode()

    def chunks() -> Iterator[bytes]:
        yield from _bytes_entry("manifest.json", index)
        for name in dict.fromkeys([config, *layers]):
            path = str(layout / name)
            info = tarfile.TarInfo(name)
            info.size, info.mode = os.stat(path).st_size, 0o644
            yield from _file_entry(path, info)
        yield _end()

    return chunks()


# -- build contexts ------------------------------------------------------------


class Dockerignore:
    """A ``.dockerignore``'s patterns, matched as Docker matches them: a path
    is excluded when the last pattern that matches it or one of its parent
    directories is not an exception (``!``). ``*`` matches within a path
    element, ``?`` one character of it, ``**`` any number of elements,
    ``[...]`` a class, and ``\\`` escapes."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.patterns: list[tuple[re.Pattern[str], bool]] = []
        for line in lines:
            if line.startswith("#"):
                continue
            p = line.strip()
            if not p:
                continue
            exception = p.startswith("!")
            if exception:
                p = p[1:].strip()
                if not p:
                    raise bad(f".dockerignore: {line!r} is an exception without a pattern")
            p = posixpath.normpath(p.replace(os.sep, "/"))
            if p.startswith("/"):
                p = "/" + p.lstrip("/")
                if len(p) > 1:
                    p = p[1:]
            try:
                self.patterns.append((re.compile(_ignore_regexp(p)), exception))
            except re.error as e:
                raise bad(f".dockerignore: bad pattern {line!r}: {e}") from e

    @classmethod
    def read(cls, context: str) -> Dockerignore | None:
        """The context directory's ``.dockerignore``; None if it has none."""
        try:
            with open(os.path.join(context, ".dockerignore"), encoding="utf-8-sig") as f:
                return cls(f.read().splitlines())
        except FileNotFoundError:
            return None

    @property
    def has_exceptions(self) -> bool:
        """Whether a pattern is an exception (``!``): excluded directories
        are then still searched."""
        return any(exc for _, exc in self.patterns)

    def excluded(self, rel: str) -> bool:
        """Whether the context path ``rel`` (``"a/b"``) is left out."""
        parent = posixpath.dirname(rel)
        parents = parent.split("/") if parent else []
        matched = False
        for rx, exception in self.patterns:
            if exception != matched:
                continue
            match = rx.fullmatch(rel) is not None
            for i in range(len(parents)):
                if match:
                    break
                match = rx.fullmatch("/".join(parents[: i + 1])) is not None
            if match:
                matched = not exception
        return matched


def _ignore_regexp(p: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(p):
        ch = p[i]
        if ch == "*" and i + 1 < len(p) and p[i + 1] == "*":
            i += 1
            if i + 1 < len(p) and p[i + 1] == "/":
                i += 1
            out.append(".*" if i + 1 == len(p) else "(.*/)?")
        elif ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch in ".+()|{}$":
            out.append("\\" + ch)
        elif ch == "\\":
            if i + 1 < len(p):
                i += 1
                out.append(re.escape(p[i]))
            else:
                out.append("\\\\")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _context_entries(
    context: str, ignore: Dockerignore | None, df_name: str
) -> Iterator[tuple[str, str, os.stat_result]]:
    """The context's (relative name, path, lstat) in lexical order, less
    what ``ignore`` excludes; a directory excluded with no exceptions in the
    file is not descended into."""

    def walk(dir_path: str, prefix: str) -> Iterator[tuple[str, str, os.stat_result]]:
        for name in sorted(os.listdir(dir_path)):
            rel = prefix + name
            path = os.path.join(dir_path, name)
            st = os.lstat(path)
            if rel == CONTEXT_DOCKERFILE:
                continue  # the place of a Dockerfile from elsewhere
            is_dir = stat.S_ISDIR(st.st_mode)
            if rel != df_name and ignore is not None and ignore.excluded(rel):
                if is_dir and ignore.has_exceptions:
                    yield from walk(path, rel + "/")
                continue
            yield rel, path, st
            if is_dir:
                yield from walk(path, rel + "/")

    return walk(context, "")


def context_archive(context: str, ignore: Dockerignore | None, df_name: str, dockerfile: bytes) -> Iterator[bytes]:
    """The build context as a tar stream: its regular files, directories and
    symlinks with their modes, without owners, less what ``ignore``
    excludes, and the Dockerfile as ``df_name`` unless it is among them."""
    saw = False
    for rel, path, st in _context_entries(context, ignore, df_name):
        info = tarfile.TarInfo(rel)
        info.mode, info.mtime = stat.S_IMODE(st.st_mode), int(st.st_mtime)
        if stat.S_ISDIR(st.st_mode):
            info.type, info.name = tarfile.DIRTYPE, rel + "/"
            yield _header(info)
        elif stat.S_ISLNK(st.st_mode):
            info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
            yield _header(info)
        elif stat.S_ISREG(st.st_mode):
            info.size = st.st_size
            saw = saw or rel == df_name
            yield from _file_entry(path, info)
        # devices, sockets and FIFOs are left out
    if not saw:
        yield from _bytes_entry(df_name, dockerfile)
    yield _end()


@dataclass
class BuildRequest:
    """A Dockerfile build, checked and ready to send."""

    params: list[tuple[str, str]]
    body: Iterator[bytes]


def build_request(
    name: str,
    context: str | os.PathLike[str],
    *,
    dockerfile: str | os.PathLike[str] | None,
    dockerfile_content: str | None,
    build_args: Mapping[str, str] | None,
    internet: bool,
    allow: Sequence[str] | None,
) -> BuildRequest:
    """The query and body of a Dockerfile build (see Client.build_template)."""
    ctx = os.fspath(context)
    if not os.path.isdir(ctx):
        raise not_found(f"build context {ctx}: not a directory")
    if isinstance(allow, str):
        raise TypeError('allow: give a list of hosts, such as allow=["pypi.mirror.example"]')
    df_name = CONTEXT_DOCKERFILE
    if dockerfile_content is not None:
        df = dockerfile_content.encode("utf-8")
    else:
        df_path = os.fspath(dockerfile) if dockerfile is not None else os.path.join(ctx, "Dockerfile")
        try:
            with open(df_path, "rb") as f:
                df = f.read()
        except OSError as e:
            raise not_found(f"Dockerfile: {e}") from e
        rel = os.path.relpath(os.path.abspath(df_path), os.path.abspath(ctx))
        if rel != os.curdir and rel != os.pardir and not rel.startswith(os.pardir + os.sep):
            df_name = rel.replace(os.sep, "/")
    ignore = Dockerignore.read(ctx)
    params: list[tuple[str, str]] = [("name", name), ("dockerfile", df_name)]
    for k in sorted(build_args or {}):
        params.append(("buildArg", f"{k}={build_args[k]}"))  # type: ignore[index]
    if internet:
        params.append(("internet", "true"))
    params += [("allow", h) for h in allow or []]
    return BuildRequest(params, context_archive(ctx, ignore, df_name, df))
