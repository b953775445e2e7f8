# Run silently in every Python kernel the agent starts (kernel.go,
# kernelStartup), before the first cell. It adds two IPython display
# formatters, so that what a cell displays carries structured data beside
# its image or HTML:
#
#   application/vnd.withruntime.chart+json      a matplotlib Figure's chart
#       (wire.Chart: type, title, axis labels and scales, elements with
#       their values), which the agent moves into the result's "chart"
#   application/vnd.withruntime.dataframe+json  a pandas DataFrame's
#       columns, {column: [values...]}
#
# and makes a PIL image saved to a file (Image.save with a path) a result
# too, shown as it is saved (as E2B's interpreter does), so a program that
# makes an image and saves it gets to see it: PIL.Image is patched when
# the user's code first imports it (an import hook), never imported here.
#
# Both are registered without importing matplotlib or pandas: a figure or
# a frame can only exist once the user's code imported them, so the
# formatters look in sys.modules first and cost nothing otherwise. A chart
# that cannot be read is left out (the image is still there); nothing here
# may break a cell. Names start with _withruntime so that they do not show
# in the user's namespace listings.


def _withruntime_install():
    import datetime
    import math
    import sys
    import warnings

    from IPython import get_ipython
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    # At most this many points in one chart, all series together; past it
    # each series is thinned evenly (first and last kept) and the chart
    # says "truncated".
    max_points = 10000
    # A DataFrame of more cells than this gets no column data (its HTML
    # and text are still there).
    max_cells = 100000

    def number(v):
        try:
            f = float(v)
        except (TypeError, ValueError, OverflowError):
            return None
        return f if math.isfinite(f) else None

    def scalar(v):
        """A JSON value for one datum: ISO 8601 for dates and times, a
        string as it is, a finite float, else None."""
        if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
            return v.isoformat()
        np = sys.modules.get("numpy")
        if np is not None:
            if isinstance(v, np.datetime64):
                return None if np.isnat(v) else str(v.astype("datetime64[us]"))
            if isinstance(v, np.str_):
                return str(v)
            if isinstance(v, np.generic):
                v = v.item()
                if isinstance(v, (datetime.datetime, datetime.date)):
                    return v.isoformat()
        if isinstance(v, str):
            return v
        if hasattr(v, "to_timestamp") and hasattr(v, "freq"):  # a pandas Period
            try:
                return v.to_timestamp().isoformat()
            except Exception:  # noqa: BLE001
                return None
        if isinstance(v, bool):
            return float(v)
        return number(v)

    def cell(v):
        """A JSON value for one DataFrame cell: as scalar, but integers
        and booleans kept as they are and anything else as its str."""
        np = sys.modules.get("numpy")
        if np is not None and isinstance(v, np.generic) and not isinstance(v, np.datetime64):
            v = v.item()
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        s = scalar(v)
        if s is None and not isinstance(v, (datetime.date, datetime.time)):
            pd = sys.modules.get("pandas")
            if pd is not None and pd.isna(v):
                return None
            return str(v)
        return s

    def text(s):
        s = "" if s is None else str(s)
        return s if s.strip() else None

    def unit(label):
        """The unit in an axis label: "Time (s)" or "Time [s]" -> "s"."""
        if not label:
            return None
        for open_, close in (("(", ")"), ("[", "]")):
            end = label.rfind(close)
            start = label.rfind(open_, 0, end)
            if start >= 0 and end == len(label.rstrip()) - 1 and end > start + 1:
                return label[start + 1 : end].strip() or None
        return None

    def plain(label):
        """A tick label without matplotlib's mathtext wrapping:
        "$\\mathdefault{10^{3}}$" -> "10^{3}"."""
        s = str(label)
        if len(s) > 1 and s[0] == "$" and s[-1] == "$":
            s = s[1:-1]
            if s.startswith("\\mathdefault{") and s.endswith("}"):
                s = s[len("\\mathdefault{") : -1]
        return s

    def converter(axis):
        get = getattr(axis, "get_converter", None)
        return get() if get else getattr(axis, "converter", None)

    def scale(ax, axis, name):
        conv = converter(axis)
        mod = type(conv).__module__ if conv is not None else ""
        fmt = type(axis.get_major_formatter()).__name__
        if mod == "matplotlib.dates" or (mod.startswith("pandas.") and "Date" in fmt):
            return "datetime"
        if mod == "matplotlib.category":
            return "categorical"
        return (ax.get_xscale if name == "x" else ax.get_yscale)()

    def axis_value(kind, v):
        """A plotted coordinate (a float in the axis's units) as the data
        it stands for."""
        f = number(v)
        if f is None:
            return scalar(v)
        if kind == "datetime":
            from matplotlib.dates import num2date

            try:
                return num2date(f).isoformat()
            except (ValueError, OverflowError):
                return f
        return f

    def ticks(ax, axis, kind):
        """The major ticks inside the view, and their labels as drawn."""
        lo, hi = sorted(axis.get_view_interval())
        span = (hi - lo) or 1.0
        locs = [t for t in axis.get_majorticklocs() if lo - span * 1e-9 <= t <= hi + span * 1e-9]
        try:
            labels = [plain(s) for s in axis.get_major_formatter().format_ticks(locs)]
        except Exception:  # noqa: BLE001 - a formatter of the user's
            labels = [""] * len(locs)
        return [axis_value(kind, t) for t in locs], labels, dict(zip(locs, labels))

    def label_at(axis, tickmap, pos):
        """The tick label of a bar or a box at a position (its centre):
        the tick there, or on a named axis (categories, set_xticks with
        labels) the nearest tick within half a tick's spacing; else the
        position itself."""
        locs = sorted(tickmap)
        for loc in locs:
            if abs(loc - pos) <= 1e-9 * max(1.0, abs(pos)):
                return tickmap[loc]
        named = type(axis.get_major_formatter()).__name__ in ("StrCategoryFormatter", "FixedFormatter") or type(
            axis.get_major_locator()
        ).__name__ in ("FixedLocator", "StrCategoryLocator")
        if named and locs:
            near = min(locs, key=lambda loc: abs(loc - pos))
            gaps = [b - a for a, b in zip(locs, locs[1:]) if b > a]
            if len(locs) == 1 or abs(near - pos) < min(gaps) / 2:
                return tickmap[near]
        return f"{pos:g}"

    def base(ax, kind):
        xl, yl = text(ax.get_xlabel()), text(ax.get_ylabel())
        c = {"type": kind, "title": text(ax.get_title())}
        if kind == "pie":
            return c
        c.update({"xLabel": xl, "yLabel": yl, "xUnit": unit(xl), "yUnit": unit(yl)})
        return c

    def planar(ax, kind):
        c = base(ax, kind)
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            sc = scale(ax, axis, name)
            tv, tl, _ = ticks(ax, axis, sc)
            c[name + "Scale"], c[name + "Ticks"], c[name + "TickLabels"] = sc, tv, tl
        return c

    def series_label(artist, i, what):
        lab = artist.get_label() or ""
        return what + " " + str(i + 1) if not lab or lab.startswith("_") else lab

    def line_chart(ax, lines):
        c = planar(ax, "line")
        c["elements"] = [
            {
                "label": series_label(ln, i, "Line"),
                "points": [[scalar(x), scalar(y)] for x, y in zip(ln.get_xdata(orig=True), ln.get_ydata(orig=True))],
            }
            for i, ln in enumerate(lines)
        ]
        return c

    def scatter_chart(ax, cols):
        c = planar(ax, "scatter")
        xs, ys = c["xScale"], c["yScale"]
        c["elements"] = [
            {
                "label": series_label(col, i, "Series"),
                "points": [[axis_value(xs, x), axis_value(ys, y)] for x, y in col.get_offsets()],
            }
            for i, col in enumerate(cols)
        ]
        return c

    def bar_horizontal(container):
        o = getattr(container, "orientation", None)
        if o in ("vertical", "horizontal"):
            return o == "horizontal"
        rects = list(container)
        if rects and all(r.sticky_edges.x and not r.sticky_edges.y for r in rects):
            return True
        if rects and all(r.sticky_edges.y and not r.sticky_edges.x for r in rects):
            return False
        hs = {r.get_height() for r in rects}
        return len(rects) > 1 and len(hs) == 1 and len({r.get_width() for r in rects}) > 1

    def bar_chart(ax, containers):
        c = base(ax, "bar")
        horizontal = any(bar_horizontal(k) for k in containers)
        if horizontal:
            # The categories are on the y axis: x is always the categories'.
            c["xLabel"], c["yLabel"] = c["yLabel"], c["xLabel"]
            c["xUnit"], c["yUnit"] = c["yUnit"], c["xUnit"]
        cat_axis = ax.yaxis if horizontal else ax.xaxis
        _, _, tickmap = ticks(ax, cat_axis, "linear")
        els = []
        for i, k in enumerate(containers):
            group = series_label(k, i, "Group")
            for r in k:
                if horizontal:
                    pos, value = r.get_y() + r.get_height() / 2, r.get_width()
                else:
                    pos, value = r.get_x() + r.get_width() / 2, r.get_height()
                els.append({"label": label_at(cat_axis, tickmap, pos), "group": group, "value": number(value)})
        c["elements"] = els
        return c

    def pie_chart(ax, wedges):
        c = base(ax, "pie")
        c["elements"] = [
            {
                "label": series_label(w, i, "Slice"),
                # Wedges keep their angles to about 7 digits.
                "angle": float(f"{abs(w.theta2 - w.theta1):.6g}"),
                "radius": number(w.r),
            }
            for i, w in enumerate(wedges)
        ]
        return c

    def rect_of(artist):
        """(x0, x1, y0, y1) of an axis-aligned rectangle drawn as a patch
        or a closed 5-point line; None for anything else."""
        if hasattr(artist, "get_path") and not hasattr(artist, "get_xdata"):
            v = artist.get_path().vertices
        else:
            xd, yd = artist.get_xdata(), artist.get_ydata()
            if len(xd) != 5:
                return None
            v = list(zip(xd, yd))
        pts = [(number(p[0]), number(p[1])) for p in v]
        if any(a is None or b is None for a, b in pts):
            return None
        xs, ys = {p[0] for p in pts}, {p[1] for p in pts}
        if len(xs) != 2 or len(ys) != 2:
            return None
        return min(xs), max(xs), min(ys), max(ys)

    def box_chart(ax, lines, patches):
        """A box plot (boxes as patches, patch_artist=True, or as lines),
        read from its shapes; None when the axes hold anything else."""
        boxes = [rect_of(p) for p in patches]
        rest = list(lines)
        if not patches:
            boxes = [rect_of(ln) for ln in lines if len(ln.get_xdata()) == 5]
            rest = [ln for ln in lines if len(ln.get_xdata()) != 5]
        if not boxes or any(b is None for b in boxes):
            return None
        segs, fliers = [], []
        for ln in rest:
            xd, yd = [number(v) for v in ln.get_xdata()], [number(v) for v in ln.get_ydata()]
            if len(xd) == 2 and None not in xd + yd:
                segs.append((xd, yd))
            elif str(ln.get_linestyle()) in ("None", "", " ", "none"):
                fliers.append((xd, yd))
            else:
                return None
        # Vertical boxes have horizontal medians: a segment inside a box,
        # as wide as it. Try both orientations.
        for vertical in (True, False):
            out = []
            for x0, x1, y0, y1 in boxes:
                p0, p1, v0, v1 = (x0, x1, y0, y1) if vertical else (y0, y1, x0, x1)
                centre = (p0 + p1) / 2
                el = {"firstQuartile": v0, "thirdQuartile": v1, "min": v0, "max": v1, "median": None, "outliers": []}
                for xd, yd in segs:
                    ps, vs = (xd, yd) if vertical else (yd, xd)
                    if vs[0] == vs[1] and v0 <= vs[0] <= v1 and min(ps) <= p0 + 1e-9 and max(ps) >= p1 - 1e-9:
                        el["median"] = vs[0]
                    elif ps[0] == ps[1] and abs(ps[0] - centre) < 1e-9 * max(1.0, abs(centre)) + 1e-12:
                        lo, hi = min(vs), max(vs)
                        if hi <= v0:
                            el["min"] = min(el["min"], lo)
                        elif lo >= v1:
                            el["max"] = max(el["max"], hi)
                for xd, yd in fliers:
                    ps, vs = (xd, yd) if vertical else (yd, xd)
                    el["outliers"] += [v for p, v in zip(ps, vs) if p is not None and v is not None and p0 <= p <= p1]
                if el["median"] is None:
                    break
                el["centre"] = centre
                out.append(el)
            else:
                c = base(ax, "box_and_whisker")
                if not vertical:
                    c["xLabel"], c["yLabel"] = c["yLabel"], c["xLabel"]
                    c["xUnit"], c["yUnit"] = c["yUnit"], c["xUnit"]
                pos_axis = ax.xaxis if vertical else ax.yaxis
                _, _, tickmap = ticks(ax, pos_axis, "linear")
                for el in out:
                    el["label"] = label_at(pos_axis, tickmap, el.pop("centre"))
                c["elements"] = [
                    {k: el[k] for k in ("label", "min", "firstQuartile", "median", "thirdQuartile", "max", "outliers")}
                    for el in out
                ]
                return c
        return None

    def axes_chart(ax):
        from matplotlib.collections import PathCollection
        from matplotlib.container import BarContainer
        from matplotlib.patches import Wedge

        # Lines in data coordinates: axhline/axvline (axes coordinates on
        # one side) are reference lines, not data.
        lines = [ln for ln in ax.lines if ln.get_transform() is ax.transData and ln.get_visible()]
        patches = [p for p in ax.patches if p.get_visible()]
        cols = [c for c in ax.collections if c.get_visible()]
        bars = [k for k in ax.containers if isinstance(k, BarContainer)]
        in_bars = {id(r) for k in bars for r in k}
        if patches and all(isinstance(p, Wedge) for p in patches) and not lines and not cols:
            return pie_chart(ax, patches)
        if bars and all(id(p) in in_bars for p in patches) and not cols:
            return bar_chart(ax, bars)
        if cols and all(isinstance(c, PathCollection) for c in cols) and not lines and not patches:
            return scatter_chart(ax, cols)
        if lines and not cols:
            box = box_chart(ax, lines, patches)
            if box is not None:
                return box
            if not patches:
                return line_chart(ax, lines)
        c = planar(ax, "unknown")
        c["elements"] = []
        return c

    def thin(chart):
        """Keeps at most max_points points in chart (and its charts)."""
        series = [e for c in [chart] + chart.get("charts", []) for e in c.get("elements", []) if "points" in e]
        total = sum(len(e["points"]) for e in series)
        if total <= max_points:
            return
        for e in series:
            pts = e["points"]
            keep = max(2, len(pts) * max_points // total)
            if len(pts) > keep:
                step = (len(pts) - 1) / (keep - 1)
                e["points"] = [pts[round(i * step)] for i in range(keep)]
        chart["truncated"] = True

    def figure_chart(fig):
        axes = [ax for ax in fig.get_axes() if ax.has_data()]
        if not axes:
            return None
        if len(axes) == 1:
            chart = axes_chart(axes[0])
        else:
            sup = getattr(fig, "_suptitle", None)
            get = getattr(fig, "get_suptitle", None)
            title = text(get() if get else (sup.get_text() if sup is not None else None))
            chart = {"type": "superchart", "title": title, "charts": [axes_chart(ax) for ax in axes]}
        thin(chart)
        return chart

    class ChartFormatter(BaseFormatter):
        format_type = Unicode("application/vnd.withruntime.chart+json")
        print_method = ObjectName("_repr_withruntime_chart_")
        _return_type = (dict,)

        def __call__(self, obj):
            mpl = sys.modules.get("matplotlib.figure")
            if mpl is None or not isinstance(obj, mpl.Figure):
                return None
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    return figure_chart(obj)
            except Exception:  # noqa: BLE001 - the image is still shown
                return None

    class DataFrameFormatter(BaseFormatter):
        format_type = Unicode("application/vnd.withruntime.dataframe+json")
        print_method = ObjectName("_repr_withruntime_dataframe_")
        _return_type = (dict,)

        def __call__(self, obj):
            pd = sys.modules.get("pandas")
            if pd is None or not isinstance(obj, pd.DataFrame):
                return None
            try:
                if obj.size > max_cells:
                    return None
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    return {str(k): [cell(v) for v in col] for k, col in obj.to_dict(orient="list").items()}
            except Exception:  # noqa: BLE001
                return None

    def patch_pil(mod):
        original = mod.Image.save
        if getattr(original, "_withruntime", False):
            return

        def save(image, fp, *args, **kwargs):
            if isinstance(fp, (str, bytes)) or hasattr(fp, "__fspath__"):
                try:
                    from IPython.display import display

                    display(image)
                except Exception:  # noqa: BLE001 - the save still happens
                    pass
            return original(image, fp, *args, **kwargs)

        save._withruntime = True
        save.__doc__, save.__name__, save.__qualname__ = original.__doc__, "save", original.__qualname__
        mod.Image.save = save

    import importlib.abc

    class PILHook(importlib.abc.MetaPathFinder):
        """Patches PIL.Image once it is loaded, then steps aside."""

        def find_spec(self, name, path=None, target=None):
            if name != "PIL.Image":
                return None
            sys.meta_path.remove(self)
            import importlib.util

            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            inner = spec.loader

            class Loader(importlib.abc.Loader):
                def create_module(self, s):
                    return inner.create_module(s)

                def exec_module(self, module):
                    inner.exec_module(module)
                    try:
                        patch_pil(module)
                    except Exception:  # noqa: BLE001
                        pass

            spec.loader = Loader()
            return spec

    if "PIL.Image" in sys.modules:
        patch_pil(sys.modules["PIL.Image"])
    else:
        sys.meta_path.insert(0, PILHook())

    ip = get_ipython()
    if ip is None:
        return
    f = ip.display_formatter
    f.formatters[ChartFormatter.format_type.default_value] = ChartFormatter(parent=f)
    f.formatters[DataFrameFormatter.format_type.default_value] = DataFrameFormatter(parent=f)


try:
    _withruntime_install()
finally:
    del _withruntime_install
