"""The SDK's hand-written response types against ``api/openapi.yaml``, field
by field, so that drift fails CI: a property the server sends that a type
lacks, a field the document does not have, a ``from_dict`` that does not
read a field, an optional property a type cannot do without, an enum that
differs from a ``Literal``.

Why hand-written types and a check rather than generated ones: users read
these classes (snake_case attributes, datetimes parsed, ``png_bytes()``,
``data_bytes``, tolerant parsing of an older or newer server); a generator's
output (datamodel-code-generator's dataclasses or TypedDicts) keeps the
wire's camelCase or needs a layer of conversion on top, which is a second
copy again. So the types stay as written and this test holds them to the
document, as the Go wire types (sdk/go/wire) are held by TestWireMatchesSpec.

How a property is checked: a sample answer is built from the schema (a
distinct value per property: a string naming it, a distinct number, a
date-time, the first enum value, nested objects from their ``$ref``), parsed
with the type's ``from_dict``, and every property's value must come out in
the field of its snake_case name. Then a sample with only the required
properties must parse too.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import re
import sys
import typing
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from withruntime import code, templates, terminal, types, volumes, watch

SPEC = Path(__file__).resolve().parents[3] / "api" / "openapi.yaml"

#: Each response type of the SDK and the schema it parses.
TYPES: dict[str, type] = {
    "Sandbox": types.SandboxInfo,
    "ExecResult": types.ExecResult,
    "Event": types.Event,
    "FileInfo": types.FileInfo,
    "FileList": types.FileListPage,
    "NetworkPolicy": types.NetworkPolicy,
    "Secret": types.SecretInfo,
    "Snapshot": types.SnapshotInfo,
    "Key": types.KeyInfo,
    "UsageReport": types.UsageReport,
    "UsageRow": types.UsageRow,
    "UsagePrices": types.UsagePrices,
    "UsageTrial": types.UsageTrial,
    "SandboxMetric": types.SandboxMetric,
    "FileURL": types.FileURL,
    "Execution": code.Execution,
    "ExecutionResult": code.Result,
    "ExecutionError": code.ExecutionError,
    "CodeContext": code.CodeContext,
    "Template": templates.Template,
    "TemplateOrigin": templates.TemplateOrigin,
    "TemplateStart": templates.TemplateStart,
    "TemplateEvent": templates.TemplateEvent,
    "PtySize": terminal.PtySize,
    "TerminalEvent": terminal.TerminalEvent,
    "Volume": volumes.VolumeInfo,
    "VolumeMount": types.VolumeMount,
    "WatchEvent": watch.WatchEvent,
}

#: Where a field's name is not the property's snake_case.
ALIASES: dict[tuple[str, str], str] = {}

#: Properties a type deliberately leaves out, with why.
LEFT_OUT: dict[tuple[str, str], str] = {
    # an error event ends the watch: it is raised as the APIError of its
    # code, never yielded, so no event holds these
    ("WatchEvent", "code"): "raised",
    ("WatchEvent", "message"): "raised",
}

#: Fields filled from inside a property rather than from one of their own:
#: a Result spreads its ``data`` MIME bundle over one field per MIME type.
DERIVED: dict[tuple[str, str], str] = {
    ("ExecutionResult", f): "data"
    for f in ("text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json", "javascript")
}

#: Enum values a type never holds, with why.
ENUM_LEFT_OUT: dict[tuple[str, str], set[str]] = {
    # the client drops heartbeats (the server's sign of life) before parsing
    ("Event", "type"): {"heartbeat"},
    # files.watch reads ready before it returns, drops heartbeats and raises
    # an error event (see LEFT_OUT)
    ("WatchEvent", "type"): {"ready", "heartbeat", "error"},
}


def snake(name: str) -> str:
    """camelCase to snake_case, an acronym kept whole: ``memoryMiB`` ->
    ``memory_mib``, ``leaseEndsAt`` -> ``lease_ends_at``."""
    words = re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)
    out = "_".join(w.lower() for w in words)
    return re.sub(r"_mi_b$", "_mib", out)


def load() -> dict[str, Any]:
    return yaml.safe_load(SPEC.read_text(encoding="utf-8"))["components"]["schemas"]


def _resolve(schemas: dict[str, Any], s: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in s:
        s = schemas[s["$ref"].rsplit("/", 1)[-1]]
    if "allOf" in s:
        merged: dict[str, Any] = {"properties": {}, "required": []}
        for part in s["allOf"]:
            p = _resolve(schemas, part)
            merged["properties"].update(p.get("properties", {}))
            merged["required"] += p.get("required", [])
        return merged
    return s


_counter = itertools.count(1)


_sampling: list[str] = []  # the $refs being sampled, outermost first


def sample(schemas: dict[str, Any], s: dict[str, Any], name: str, only_required: bool = False) -> Any:
    """A sample value of schema ``s``, distinct per call. A schema that
    holds itself (a Chart's charts) is sampled one level deep."""
    ref = s.get("$ref", "")
    if ref:
        _sampling.append(ref)
        try:
            return sample(schemas, schemas[ref.rsplit("/", 1)[-1]], name, only_required)
        finally:
            _sampling.pop()
    s = _resolve(schemas, s)
    n = next(_counter)
    if "enum" in s:
        return s["enum"][-1]
    t = s.get("type")
    if isinstance(t, list):
        t = next(x for x in t if x != "null")
    if t == "object" or "properties" in s:
        props = s.get("properties")
        if props is None:
            return {f"k{n}": f"v{n}"}
        req = set(s.get("required", []))
        return {k: sample(schemas, v, k, only_required) for k, v in props.items() if not only_required or k in req}
    if t == "array":
        items = s.get("items", {})
        if items.get("$ref") in _sampling:
            return []
        return [sample(schemas, items, name, only_required)]
    if t == "integer":
        return 1000 + n
    if t == "number":
        return 0.5 + n
    if t == "boolean":
        return True
    if s.get("format") == "date-time":
        return f"2026-01-{n % 28 + 1:02d}T10:{n % 60:02d}:00Z"
    if s.get("format") == "byte":
        return "aGk="
    return f"{name}-{n}"


def same(value: Any, want: Any) -> bool:
    """Whether a parsed field holds the sample ``want``."""
    if dataclasses.is_dataclass(value) and isinstance(want, dict):
        names = {f.name for f in dataclasses.fields(value)}
        pairs = [(snake(k) if snake(k) in names else snake(k) + "_", w) for k, w in want.items()]
        return all(same(getattr(value, f), w) for f, w in pairs if f in names)
    if isinstance(value, datetime) and isinstance(want, str):
        return value == datetime.fromisoformat(want.replace("Z", "+00:00"))
    if isinstance(value, (list, tuple)) and isinstance(want, list):
        return len(value) == len(want) and all(same(v, w) for v, w in zip(value, want))
    if isinstance(value, float) and isinstance(want, (int, float)):
        return value == float(want)
    return bool(value == want)


def literal_values(cls: type, field: str) -> set[Any] | None:
    """The values of a ``Literal`` in the field's annotation, if any."""
    hints = typing.get_type_hints(cls, {**vars(types), **vars(sys.modules[cls.__module__])})
    found: set[Any] = set()
    for arg in [hints[field], *typing.get_args(hints[field])]:
        if typing.get_origin(arg) is typing.Literal:
            found.update(typing.get_args(arg))
    return found or None


def check(schemas: dict[str, Any], name: str, cls: type) -> list[str]:
    """What differs between schema ``name`` and type ``cls``, one line each."""
    problems: list[str] = []
    s = _resolve(schemas, schemas[name])
    props: dict[str, Any] = s.get("properties", {})
    fields = {f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")}
    wanted: dict[str, str] = {}
    for prop in props:
        if (name, prop) in LEFT_OUT:
            continue
        field = ALIASES.get((name, prop), snake(prop))
        if field not in fields and field + "_" in fields:  # from -> from_
            field += "_"
        if field not in fields:
            problems.append(f"{name}.{prop}: the server sends it, {cls.__name__} has no field {field}")
            continue
        wanted[prop] = field
    for field in sorted(fields - set(wanted.values())):
        if DERIVED.get((name, field)) in props:
            continue
        problems.append(f"{cls.__name__}.{field}: no property of {name} in the document gives it")

    full = sample(schemas, schemas[name], name)
    obj = cls.from_dict(full)  # type: ignore[attr-defined]
    for prop, field in wanted.items():
        if not same(getattr(obj, field), full[prop]):
            problems.append(
                f"{name}.{prop}: {cls.__name__}.from_dict does not read it into {field} "
                f"(sent {full[prop]!r}, got {getattr(obj, field)!r})"
            )
        enum = _resolve(schemas, props[prop]).get("enum")
        lit = literal_values(cls, field)
        if enum is not None:
            enum = set(enum) - ENUM_LEFT_OUT.get((name, prop), set())
        if enum is not None and lit is not None and enum != lit:
            problems.append(f"{name}.{prop}: enum {sorted(enum)} but {cls.__name__}.{field} is Literal {sorted(lit)}")
    try:
        cls.from_dict(sample(schemas, schemas[name], name, only_required=True))  # type: ignore[attr-defined]
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        problems.append(f"{name}: {cls.__name__}.from_dict fails without the optional properties: {e!r}")
    return problems


@pytest.mark.parametrize("name", sorted(TYPES))
def test_type_matches_schema(name: str) -> None:
    problems = check(load(), name, TYPES[name])
    assert not problems, "the SDK's types drifted from api/openapi.yaml:\n" + "\n".join(problems)


def test_a_field_the_types_lack_fails() -> None:
    """The must-show: a property the server sends that the SDK's type lacks
    is reported (here, one added to a copy of the document's Sandbox)."""
    schemas = copy.deepcopy(load())
    schemas["Sandbox"]["properties"]["snapshotCount"] = {"type": "integer"}
    problems = check(schemas, "Sandbox", types.SandboxInfo)
    assert problems == ["Sandbox.snapshotCount: the server sends it, SandboxInfo has no field snapshot_count"]


def test_a_field_removed_from_a_type_fails() -> None:
    """The same from the other side: a copy of SandboxInfo without a field
    the document has is reported, and so is a from_dict that stops reading
    a field."""
    kept = [f for f in dataclasses.fields(types.SandboxInfo) if f.name != "image_bytes"]

    def parse(cls: type, d: dict[str, Any]) -> Any:
        full = types.SandboxInfo.from_dict(d)
        return cls(**{f.name: getattr(full, f.name) for f in kept})

    lacking = dataclasses.make_dataclass(
        "SandboxInfo", [(f.name, f.type, f) for f in kept], namespace={"from_dict": classmethod(parse)}
    )
    problems = check(load(), "Sandbox", lacking)
    assert "Sandbox.imageBytes: the server sends it, SandboxInfo has no field image_bytes" in problems

    class NotReading(types.SandboxInfo):
        @classmethod
        def from_dict(cls, d: dict[str, Any]) -> types.SandboxInfo:
            return types.SandboxInfo.from_dict({k: v for k, v in d.items() if k != "autoResume"})

    problems = check(load(), "Sandbox", NotReading)
    assert len(problems) == 1 and problems[0].startswith("Sandbox.autoResume: NotReading.from_dict does not read it")


def test_snake() -> None:
    assert snake("memoryMiB") == "memory_mib"
    assert snake("leaseEndsAt") == "lease_ends_at"
    assert snake("id") == "id"
    assert snake("cpuSeconds") == "cpu_seconds"
