"""Checking a model's arguments (a port of the Go SDK's tools/args.go). The
messages are for the model."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Field:
    name: str
    #: Integer fields are whole numbers; the others are strings.
    integer: bool = False
    #: Essential fields must be present (others may be left out and take
    #: "" or 0).
    essential: bool = False
    #: The most bytes a string may have (0: no limit).
    max: int = 0


class ArgsError(Exception):
    """Invalid arguments; the message says what is wrong, for the model."""


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def json_kind(v: Any) -> str:
    if isinstance(v, str):
        return "a string"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, (list, tuple)):
        return "an array"
    if isinstance(v, bool):
        return "a boolean"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return "a number"
    return f"a {type(v).__name__}"


def whole_number(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ArgsError(f"must be a whole number, not {json_kind(v)}")
    if isinstance(v, int):
        if abs(v) > 1 << 53:
            raise ArgsError(f"must be a whole number, not {v}")
        return v
    if math.isnan(v) or math.isinf(v) or v != math.trunc(v) or abs(v) > 1 << 53:
        raise ArgsError(f"must be a whole number, not {v!r}")
    return int(v)


def parse_json_args(raw: str | bytes | bytearray | None) -> dict[str, Any]:
    """Parses the model's arguments (a JSON object, possibly JSON-encoded a
    second time, or empty) into a dict."""
    if raw is None:
        return {}
    text = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else raw
    text = text.strip()
    # Some models send the arguments JSON-encoded a second time.
    if text.startswith('"'):
        try:
            inner = json.loads(text)
            if isinstance(inner, str):
                text = inner.strip()
        except ValueError:
            pass
    if not text or text == "null":
        return {}
    try:
        obj, end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError as e:
        raise ArgsError(f"the arguments must be one JSON object (invalid JSON at byte {e.pos}: {e.msg})") from None
    if text[end:].strip():
        raise ArgsError("the arguments must be one JSON object, with nothing after it")
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise ArgsError(f"the arguments must be one JSON object (got {json_kind(obj)})")
    return obj


def decode_args(obj: dict[str, Any], fields: tuple[Field, ...]) -> tuple[dict[str, str], dict[str, int]]:
    """Checks the arguments against fields; returns the strings and the
    numbers by name, absent fields at "" or 0. Raises ArgsError."""
    strs: dict[str, str] = {}
    nums: dict[str, int] = {}
    known = {f.name for f in fields}
    unknown = sorted(_q(str(k)) for k in obj if k not in known)
    if unknown:
        raise ArgsError("unknown field " + ", ".join(unknown))
    for f in fields:
        v = obj.get(f.name)
        if v is None:
            if f.essential:
                raise ArgsError(f"missing {_q(f.name)}")
            continue
        if f.integer:
            try:
                nums[f.name] = whole_number(v)
            except ArgsError as e:
                raise ArgsError(f"{_q(f.name)} {e}") from None
            continue
        if not isinstance(v, str):
            raise ArgsError(f"{_q(f.name)} must be a string, not {json_kind(v)}")
        try:
            n = len(v.encode("utf-8"))
        except UnicodeEncodeError:
            raise ArgsError(f"{_q(f.name)} is not valid UTF-8") from None
        if f.max and n > f.max:
            raise ArgsError(f"{_q(f.name)} is {n} bytes, over the limit of {f.max}")
        if "\x00" in v:
            raise ArgsError(f"{_q(f.name)} contains a NUL character, which is not allowed")
        strs[f.name] = v
    return strs, nums
