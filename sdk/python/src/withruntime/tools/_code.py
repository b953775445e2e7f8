"""runtime_run_code: the code interpreter's tool (a port of the Go SDK's
tools/code.go, whose text it gives byte for byte), and the provider shapes
of a result with images."""

from __future__ import annotations

import base64
import binascii
import struct
from typing import Any

from ..code import Execution, Result
from ..errors import UnsupportedError, WithRuntimeError
from . import _run
from ._cap import CapBuf
from ._chart import chart_text
from ._run import MAX_OUTPUT_BYTES

RUN_CODE_NAME = "runtime_run_code"
MAX_CODE_BYTES = 256 << 10
MAX_IMAGES = 4
MAX_IMAGE_BYTES = 5 << 20
MAX_RESULT_TEXT_BYTES = 8 << 10
CODE_TIMEOUT_SECONDS = 120


# The languages runtime_run_code takes (E2B's short names among them), each
# to the name the server knows it by.
CODE_LANGUAGES = {
    "": "", "python": "", "python3": "", "py": "",
    "javascript": "javascript", "js": "javascript", "typescript": "typescript", "ts": "typescript",
    "r": "r", "bash": "bash", "sh": "bash", "java": "java",
}


def check_run_code(s: dict[str, str], n: dict[str, int]) -> str:
    lang = s.get("language", "")
    if lang.lower() not in CODE_LANGUAGES:
        return f"language {_go_quote(lang)} is not available; runtime_run_code runs python, javascript, typescript, r, bash or java (use runtime_exec for other languages)"
    if not s.get("code", "").strip():
        return "code is empty; give the code to run"
    return ""


def _go_quote(s: str) -> str:
    import json

    return json.dumps(s, ensure_ascii=False)


def not_implemented_result() -> dict[str, Any]:
    return _run.error_result(
        'this sandbox has no Python kernel (it is not of the "code-interpreter" template); use runtime_exec to run python3 instead'
    )


def run_error(e: WithRuntimeError) -> dict[str, Any]:
    if isinstance(e, UnsupportedError):
        return not_implemented_result()
    return _run.api_result(e, "")


def _capped(text: str, limit: int, what: str) -> str:
    c = CapBuf(limit)
    c.write(text.encode("utf-8", "surrogatepass"))
    return c.text(what)[0]


def _png_size(b: bytes) -> tuple[int, int] | None:
    if len(b) < 24 or b[:8] != b"\x89PNG\r\n\x1a\n" or b[12:16] != b"IHDR":
        return None
    w, h = struct.unpack(">II", b[16:24])
    return (w, h) if w > 0 and h > 0 else None


def _jpeg_size(b: bytes) -> tuple[int, int] | None:
    if len(b) < 4 or b[:2] != b"\xff\xd8":
        return None
    i = 2
    while i + 4 <= len(b):
        if b[i] != 0xFF:
            return None
        marker = b[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        (length,) = struct.unpack(">H", b[i + 2 : i + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if i + 9 > len(b):
                return None
            h, w = struct.unpack(">HH", b[i + 5 : i + 9])
            return (w, h) if w > 0 and h > 0 else None
        i += 2 + length
    return None


def result_image(r: Result) -> tuple[dict[str, Any] | None, str]:
    """The result's PNG or JPEG, checked (what the sandbox sent may be
    anything), as {"mimeType", "data" (base64), "width", "height"}; or
    None and why not."""
    for mime in ("image/png", "image/jpeg"):
        s = r.data.get(mime)
        if not isinstance(s, str) or s == "":
            continue
        if len(s) * 3 // 4 > MAX_IMAGE_BYTES + MAX_IMAGE_BYTES // 8:
            return None, f"an image ({mime}) over {MAX_IMAGE_BYTES} bytes, not attached"
        try:
            data = base64.b64decode("".join(s.split()), validate=True)
        except (binascii.Error, ValueError):
            data = b""
        if not data or len(data) > MAX_IMAGE_BYTES:
            return None, f"an image ({mime}) that is not valid base64 or is over {MAX_IMAGE_BYTES} bytes, not attached"
        size = _png_size(data) if mime == "image/png" else _jpeg_size(data)
        if size is None:
            return None, f"an image that does not decode as {mime}, not attached"
        return {
            "mimeType": mime,
            "data": base64.b64encode(data).decode("ascii"),
            "width": size[0],
            "height": size[1],
        }, ""
    return None, ""


def summarize(ex: Execution) -> tuple[str, list[dict[str, Any]]]:
    """The text the model reads, and the images that go with it."""
    out: list[str] = []
    if ex.notice and not ex.state_lost:
        out.append(f"notice: {ex.notice}\n")
    out.append(f"execution_count: {ex.execution_count}\n")
    for name, s in (("stdout", "".join(ex.logs.stdout)), ("stderr", "".join(ex.logs.stderr))):
        if s == "":
            out.append(f"{name}: (empty)\n")
        else:
            out.append(f"{name}:\n{_capped(s, MAX_OUTPUT_BYTES, name).rstrip(chr(10))}\n")
    images: list[dict[str, Any]] = []
    for r in ex.results:
        label = "result" if r.is_main_result else "display"
        img, why = result_image(r)
        if img is not None and len(images) < MAX_IMAGES:
            images.append(img)
            out.append(f"{label}: image {len(images)} ({img['mimeType']}, {img['width']}x{img['height']}) attached\n")
        elif img is not None:
            out.append(
                f"{label}: an image ({img['mimeType']}, {img['width']}x{img['height']}) not attached: "
                f"at most {MAX_IMAGES} images are returned per call\n"
            )
        elif why:
            out.append(f"{label}: {why}\n")
        if r.chart is not None:
            out.append(chart_text(label, r.chart))
        t = r.text or ""
        if t and (img is None or r.is_main_result):
            out.append(f"{label}:\n{_capped(t, MAX_RESULT_TEXT_BYTES, label).rstrip(chr(10))}\n")
    if ex.error is not None:
        out.append(f"error: {ex.error.name}: {ex.error.value}\n")
        tb = ex.error.traceback.strip()
        if tb:
            out.append(f"traceback:\n{_capped(tb, MAX_OUTPUT_BYTES, 'the traceback')}\n")
    return "".join(out).rstrip("\n"), images


def code_result(ex: Execution) -> dict[str, Any]:
    text, images = summarize(ex)
    res = _run.result(text, _execution_json(ex))
    if images:
        res["images"] = images
    return res


def _execution_json(ex: Execution) -> dict[str, Any]:
    d: dict[str, Any] = {
        "contextId": ex.context_id,
        "results": [r.to_dict() for r in ex.results],
        "logs": {"stdout": ex.logs.stdout, "stderr": ex.logs.stderr},
        "executionCount": ex.execution_count,
        "durationMs": ex.duration_ms,
    }
    if ex.error is not None:
        d["error"] = {"name": ex.error.name, "value": ex.error.value, "traceback": ex.error.traceback}
    for key, v in (
        ("timedOut", ex.timed_out),
        ("outOfMemory", ex.out_of_memory),
        ("stateLost", ex.state_lost),
        ("restarted", ex.restarted),
        ("notice", ex.notice),
    ):
        if v:
            d[key] = v
    return d
