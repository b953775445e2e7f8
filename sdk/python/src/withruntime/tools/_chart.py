"""A chart as runtime_run_code's text gives it (a port of the Go SDK's
tools/chart.go, whose text it gives byte for byte): the numbers a figure
plots, for a model to read beside its image."""

from __future__ import annotations

import json
from typing import Any

#: How many points of a series the text shows, evenly spread.
CHART_TEXT_POINTS = 20
#: How many elements (or charts) of a chart the text shows.
CHART_TEXT_ELEMENTS = 50
#: The most points a chart carries (past it the server thins its series).
MAX_CHART_POINTS = 10000


def chart_text(label: str, chart: dict[str, Any]) -> str:
    out: list[str] = []
    _write_chart(out, label + ": ", "  ", chart)
    return "".join(out)


def _quote(s: Any) -> str:
    return json.dumps(s if isinstance(s, str) else "", ensure_ascii=False)


def _str(d: dict[str, Any], key: str) -> str:
    v = d.get(key)
    return v if isinstance(v, str) else ""


def _list(d: dict[str, Any], key: str) -> list[Any]:
    v = d.get(key)
    return v if isinstance(v, list) else []


def _write_chart(out: list[str], head: str, indent: str, c: dict[str, Any]) -> None:
    typ = _str(c, "type")
    s = head + "chart " + typ
    if _str(c, "title"):
        s += " " + _quote(c["title"])
    if typ not in ("pie", "superchart"):
        s += "; x: " + _axis(_str(c, "xLabel"), _str(c, "xScale")) + "; y: " + _axis(_str(c, "yLabel"), _str(c, "yScale"))
    if c.get("truncated") is True:
        s += f"; thinned to {MAX_CHART_POINTS} points"
    out.append(s + "\n")
    charts = [x for x in _list(c, "charts") if isinstance(x, dict)]
    for i, sub in enumerate(charts):
        if i == CHART_TEXT_ELEMENTS:
            out.append(f"{indent}... {len(charts) - i} more charts\n")
            break
        _write_chart(out, indent, indent + "  ", sub)
    elements = [x for x in _list(c, "elements") if isinstance(x, dict)]
    for i, e in enumerate(elements):
        if i == CHART_TEXT_ELEMENTS:
            out.append(f"{indent}... {len(elements) - i} more elements\n")
            break
        out.append(indent + _element(typ, e) + "\n")


def _axis(label: str, scale: str) -> str:
    s = _quote(label) if label else "(no label)"
    if scale:
        s += " (" + scale + ")"
    return s


def _element(typ: str, e: dict[str, Any]) -> str:
    lab = _quote(_str(e, "label"))
    if typ in ("line", "scatter"):
        pts = _list(e, "points")
        n = len(pts)
        k = min(n, CHART_TEXT_POINTS)
        parts = []
        for i in range(k):
            p = pts[i * (n - 1) // (k - 1) if k > 1 else 0]
            if isinstance(p, list) and len(p) == 2:
                parts.append(f"({_coord(p[0])}, {_coord(p[1])})")
        s = f"{lab}: {n} points (x, y): {' '.join(parts)}"
        if k < n:
            s += f" ({k} of {n}, evenly spread)"
        return s
    if typ == "bar":
        return f"{lab} in {_quote(_str(e, 'group'))}: {_num(e.get('value'))}"
    if typ == "pie":
        return f"{lab}: {_num(e.get('angle'))} degrees, radius {_num(e.get('radius'))}"
    if typ == "box_and_whisker":
        s = (
            f"{lab}: min {_num(e.get('min'))}, first quartile {_num(e.get('firstQuartile'))}, "
            f"median {_num(e.get('median'))}, third quartile {_num(e.get('thirdQuartile'))}, max {_num(e.get('max'))}"
        )
        outliers = _list(e, "outliers")
        if outliers:
            parts = []
            for i, v in enumerate(outliers):
                if i == CHART_TEXT_POINTS:
                    parts.append(f"and {len(outliers) - i} more")
                    break
                parts.append(_num(v))
            s += ", outliers " + " ".join(parts)
        return s
    return lab


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _coord(v: Any) -> str:
    if v is None:
        return "null"
    if _is_num(v):
        return _g6(v)
    if isinstance(v, str):
        return v
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def _num(v: Any) -> str:
    return _g6(v) if _is_num(v) else "null"


def _g6(v: float) -> str:
    """v with 6 significant digits, as Go's strconv 'g' (C's %g)."""
    return f"{float(v):.6g}"
