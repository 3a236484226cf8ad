"""Draws a `ChartData` with a `Style` on a Matplotlib Agg canvas, rasterizing once.

The plot elements are drawn here; axes decoration and the layout (solved by measuring texts
before the draw) are in `chart_info_axes`. `Drawn` keeps the artists and the plotted geometry in
data coordinates, which `chart_info_geometry` turns into the official annotations.
"""

from __future__ import annotations

import dataclasses
import functools
import textwrap

import numpy as np
from matplotlib.collections import PatchCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import Affine2D

from chartjax.synth import chart_info_axes as ax_
from chartjax.synth import chart_info_tables as tb
from chartjax.synth.agg_canvas import ReusedCanvas
from chartjax.synth.chart_info_style import Style, font

DPI = ax_.DPI
LayoutError = ax_.LayoutError


@dataclasses.dataclass
class Drawn:
    """A drawn chart: the canvas, its artists and the plotted geometry in data coordinates."""

    fig: Figure
    canvas: ReusedCanvas
    ax: object
    data: tb.ChartData
    style: Style
    horizontal: bool = False  # categories on the vertical axis
    title: Text | None = None
    legend: object = None
    axes: list = dataclasses.field(default_factory=list)  # AxisTicks: independent axis first
    extents: dict = dataclasses.field(default_factory=dict)  # chart_info_axes.extent's cache
    bars: list = dataclasses.field(default_factory=list)  # (category, series, x0, x1, v0, v1)
    lines: list = dataclasses.field(default_factory=list)  # per series: [(pos, value)]
    points: list = dataclasses.field(default_factory=list)  # scatter: [(x, y)]
    boxes: list = dataclasses.field(default_factory=list)  # (pos, width, cap_width, stats)
    value_labels: list = dataclasses.field(default_factory=list)  # Text per bar (--value-labels)

    def rgba(self) -> np.ndarray:
        return self.canvas.rgba()


def _prop(style: Style, size: float):
    return font(style, size)


def _wrap(text: str, width: int) -> str:
    # No breaks at hyphens, so joining the lines with spaces gives the name back.
    return textwrap.fill(text, width, break_on_hyphens=False) if len(text) > width else text


def _tick_texts(ticks: np.ndarray, thousands: bool) -> tuple[str, ...]:
    """Fewest decimals that still tell every tick apart exactly (hand-written: no formatter
    gives fixed strings we can annotate before drawing)."""
    scale = max(float(np.max(np.abs(ticks))), 1e-12)
    for dec in range(7):
        if np.all(np.abs(np.round(ticks, dec) - ticks) <= 1e-9 * scale):
            break
    fmt = f"{{:{',' if thousands else ''}.{dec}f}}"
    out = []
    for t in ticks:
        s = fmt.format(float(t))
        out.append(s[1:] if s.startswith("-") and float(t) == 0 else s)
    return tuple(out)


def _value_ticks(lo: float, hi: float, style: Style) -> tuple[np.ndarray, tuple[str, ...]]:
    eps = 1e-9 * (hi - lo)
    ticks = np.array([])
    for bins in range(style.value_ticks, style.value_ticks + 8):  # at least two ticks in view
        ticks = MaxNLocator(nbins=bins, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
        ticks = np.array([t for t in ticks if lo - eps <= t <= hi + eps])
        if len(ticks) >= 2:
            break
    ticks = np.where(np.abs(ticks) < 1e-9 * (hi - lo), 0.0, ticks)
    return ticks, _tick_texts(ticks, style.thousands)


def _limits(lo: float, hi: float, zero: bool, head: float = 0.08) -> tuple[float, float]:
    if zero:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    span = (hi - lo) or max(abs(hi), 1.0)
    lo2 = lo if (zero and lo == 0.0) else lo - 0.06 * span
    hi2 = hi if (zero and hi == 0.0) else hi + head * span
    return lo2, hi2


@functools.lru_cache(maxsize=4)
def _canvas(width: int, height: int) -> tuple[Figure, ReusedCanvas, object]:
    """One figure, canvas and axes per image size and process, emptied per chart (charts are
    drawn one at a time per process). A fresh Agg renderer allocates a 1280 x 960 buffer and a
    fresh or cleared Axes rebuilds all its tick machinery: together a fifth of a chart's time.
    The canvas's renderer caches font look-ups and text layout (`agg_canvas`)."""
    fig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI)
    canvas = ReusedCanvas(fig)
    ax = fig.add_axes((0.1, 0.1, 0.8, 0.8))
    ax.xaxis.set_visible(False)  # chart_info_axes draws the ticks (see there why)
    ax.yaxis.set_visible(False)
    return fig, canvas, ax


def _reset(fig: Figure, ax) -> None:
    """Removes the previous chart's artists and undoes what any chart type changes, so a chart
    never depends on the one drawn before it (the determinism test compares worker counts)."""
    for artist in [*ax.lines, *ax.patches, *ax.collections, *ax.texts, *ax.artists, *fig.texts]:
        artist.remove()
    if ax.legend_ is not None:
        ax.legend_.remove()
    ax.containers.clear()  # errorbar() registers containers; their artists are gone already
    ax.set_aspect("auto")
    ax.set_frame_on(True)
    ax.ignore_existing_data_limits = True
    ax.set_position((0.1, 0.1, 0.8, 0.8))


def render(data: tb.ChartData, style: Style) -> Drawn:
    """Draws `data`; raises LayoutError when no layout fits the image."""
    fig, canvas, ax = _canvas(style.width, style.height)
    _reset(fig, ax)
    fig.patch.set_facecolor(style.fig_facecolor)
    fig.patch.set_edgecolor(style.edge_color if style.fig_border else "none")
    fig.patch.set_linewidth(style.fig_border)
    ax.set_facecolor(style.axes_facecolor)
    d = Drawn(fig, canvas, ax, data, style, horizontal=data.chart_type in tb.HORIZONTAL_TYPES)
    if style.show_title:
        width_chars = int(style.width * 0.9 / (0.6 * style.title_size * DPI / 72))
        d.title = fig.text(
            0.5,
            1.0,
            _wrap(data.title, width_chars),
            va="top",
            ha=style.title_loc,  # fixed before any measuring (chart_info_axes.extent)
            multialignment=style.title_loc,
            fontproperties=_prop(style, style.title_size),
            color=style.text_color,
        )
    pie = data.chart_type in (tb.PIE, tb.DONUT)
    if pie:
        _draw_pie(d)
    else:
        _draw_axes_chart(d)
    ax_.layout(d, square=pie)
    if style.text_grid:
        snap_texts(d, style.text_grid)
    canvas.draw()
    return d


def snap_texts(d: Drawn, grid: int) -> None:
    """Moves the texts a chart's table is read from (the value labels and the category labels:
    ticks, title and legend stay where the layout put them) so that the top-left corner of each
    box lies on the `grid`-pixel lattice of the image, at the nearest point that keeps the box
    inside; after the layout, so nothing else moves. Agg draws a text at whole pixels from its
    box, so a string in one font and size is then the same pixels wherever it lands on a patch
    grid of side `grid`: reading without the sub-patch phase, whose cost to a ViT the reading
    probe measured (the former tools/bench/reading_probe.py). Up to grid / 2 pixels off its bar or tick."""
    W, H = d.style.width, d.style.height
    texts = list(d.value_labels) + (list(d.axes[0].labels) if d.axes else [])
    for t in texts:
        if not (t.get_visible() and t.get_text()):
            continue
        box = ax_.extent(d, t)
        top = H - box.y1  # image rows grow downwards
        x = _on_lattice(box.x0, box.width, W, grid)
        y = _on_lattice(top, box.height, H, grid)
        # Exact up to the float residue of the composed transform (~1e-13 px): Agg rounds to
        # whole pixels, but the annotation floors, so a box may be noted one pixel short of it.
        t.set_transform(t.get_transform() + Affine2D().translate(x - box.x0, top - y))


def _on_lattice(start: float, length: float, room: int, grid: int) -> float:
    """The multiple of `grid` nearest `start` at which [start, start + length] stays in
    [0, room] when it can (a box longer than the room keeps its nearest multiple)."""
    near = grid * round(start / grid)
    for cand in sorted(range(near - 2 * grid, near + 3 * grid, grid), key=lambda v: abs(v - start)):
        if cand >= 0 and cand + length <= room:
            return float(cand)
    return float(near)


# ---------------------------------------------------------------- pie and donut


def _draw_pie(d: Drawn) -> None:
    s, data, ax = d.style, d.data, d.ax
    vals = d.data.values()[:, 0]
    wedgeprops = {"linewidth": s.edge_width, "edgecolor": s.fig_facecolor}
    if data.chart_type == tb.DONUT:
        wedgeprops["width"] = s.donut_width * s.pie_radius
    textprops = {"fontproperties": _prop(s, s.tick_size), "color": s.text_color}
    ax.pie(
        vals,
        labels=[_wrap(c, 16) for c in data.categories] if s.pie_labels else None,
        colors=s.colors,
        radius=s.pie_radius,
        startangle=s.start_angle,
        counterclock=s.counterclock,
        autopct="%1.1f%%" if s.pie_pct else None,
        wedgeprops=wedgeprops,
        textprops=textprops,
    )
    ax.set_aspect("equal")
    if s.pie_legend:
        handles = [Rectangle((0, 0), 1, 1, facecolor=c) for c in s.colors]
        d.legend = ax.legend(
            handles,
            [_wrap(c, 20) for c in data.categories],
            loc="center left",
            bbox_to_anchor=(1.02, 0.5),
            frameon=s.legend_frame,
            prop=_prop(s, s.legend_size),
            labelcolor=[s.text_color],
            edgecolor=s.legend_edge,
            framealpha=1.0,
        )


# ---------------------------------------------------------------- charts with axes


def _draw_axes_chart(d: Drawn) -> None:
    s, data, ax = d.style, d.data, d.ax
    ct = data.chart_type
    n = len(data.categories)
    scatter_x = None
    if ct == tb.SCATTER:
        lo, hi, scatter_x = _draw_scatter(d)
    elif ct in tb.BOX_TYPES:
        lo, hi = _draw_boxes(d)
    elif ct == tb.LINE:
        lo, hi = _draw_lines(d)
    else:
        lo, hi = _draw_bars(d)
    legend_inside = d.legend is not None and not s.legend_loc.startswith("outside")
    head = 0.25 if legend_inside and "upper" in s.legend_loc else 0.08
    if s.value_label_size and ct in tb.BAR_TYPES:
        head = max(head, 0.15)  # room for the labels above the longest bar
    vlo, vhi = _limits(lo, hi, ct in tb.BAR_TYPES, head)
    ticks, labels = _value_ticks(vlo, vhi, s)
    (ax.set_xlim if d.horizontal else ax.set_ylim)(vlo, vhi)
    grid_x = s.grid in ("x", "both")
    grid_y = s.grid in ("y", "both")
    if ct == tb.SCATTER:
        xlo, xhi = _limits(*scatter_x, False)
        ax.set_xlim(xlo, xhi)
        xt, xl = _value_ticks(xlo, xhi, s)
        ind = ax_.add_axis(d, "x-axis", "bottom", xt, xl, grid_x)
    else:
        pad = 0.5 if ct != tb.LINE else 0.3
        if d.horizontal:
            ax.set_ylim(n - 1 + pad, -pad)  # first category on top
        else:
            ax.set_xlim(-pad, n - 1 + pad)
        names = [_wrap(c, 14) for c in data.categories]
        side = "left" if d.horizontal else "bottom"
        ind = ax_.add_axis(
            d, "x-axis", side, np.arange(n), names, grid_y if d.horizontal else grid_x
        )
        if not d.horizontal and s.cat_rotation:
            ax_.set_rotation(ind.labels, s.cat_rotation)
    val_side = "bottom" if d.horizontal else ("right" if s.value_ticks_right else "left")
    dep = ax_.add_axis(d, "y-axis", val_side, ticks, labels, grid_x if d.horizontal else grid_y)
    d.axes = [ind, dep]
    if s.show_x_title:
        ax_.add_axis_title(d, ind, _wrap(data.x_label, 40))
    if s.show_y_title:
        ax_.add_axis_title(d, dep, _wrap(data.y_label, 40))
    for name, spine in ax.spines.items():
        spine.set_color(s.spine_color)
        spine.set_linewidth(s.spine_width)
        if s.spines == "open":
            shown = name in ("bottom", "right" if val_side == "right" else "left")
        else:
            shown = s.spines == "box"
        spine.set_visible(shown)


def _add_legend(d: Drawn, handles: list) -> None:
    s = d.style
    labels = [_wrap(name, 22) for name in d.data.series]
    kw = {"loc": s.legend_loc}
    if s.legend_loc == "outside right":
        kw = {"loc": "center left", "bbox_to_anchor": (1.02, 0.5)}
    elif s.legend_loc == "outside top":
        kw = {"loc": "lower center", "bbox_to_anchor": (0.5, 1.01)}
    d.legend = d.ax.legend(
        handles,
        labels,
        ncol=s.legend_ncol,
        frameon=s.legend_frame,
        prop=_prop(s, s.legend_size),
        labelcolor=[s.text_color],
        edgecolor=s.legend_edge,
        framealpha=1.0,
        **kw,
    )


def _draw_bars(d: Drawn) -> tuple[float, float]:
    s, data, ax = d.style, d.data, d.ax
    vals = data.values()
    n_cat, n_ser = vals.shape
    stacked = data.chart_type.startswith("Stacked")
    bw = s.bar_width if stacked else s.bar_width / n_ser
    base = np.zeros(n_cat)
    lo, hi = 0.0, 0.0
    rects: list[list[Rectangle]] = [[] for _ in range(n_ser)]
    for c in range(n_cat):
        for k in range(n_ser):
            v = vals[c, k]
            center = c if stacked else c + (k - (n_ser - 1) / 2) * bw
            v0, v1 = (base[c], base[c] + v) if stacked else (0.0, v)
            if stacked:
                base[c] += v
            b, t = min(v0, v1), max(v0, v1)
            err = abs(v) * s.error_frac if s.error_bars else 0.0
            lo, hi = min(lo, b - err), max(hi, t + err)
            d.bars.append((c, k, center - bw / 2, center + bw / 2, v0, v1))
            xy = (b, center - bw / 2) if d.horizontal else (center - bw / 2, b)
            w, h = (t - b, bw) if d.horizontal else (bw, t - b)
            rects[k].append(Rectangle(xy, w, h))
    # One collection per series: far cheaper than Axes.bar's per-patch bookkeeping.
    handles = []
    for k in range(n_ser):
        props = {
            "facecolor": s.colors[k],
            "edgecolor": s.edge_color if s.edge_width else "none",
            "linewidth": s.edge_width,
            "hatch": s.hatches[k] or None,
        }
        ax.add_collection(PatchCollection(rects[k], **props), autolim=False)
        handles.append(Rectangle((0, 0), 1, 1, **props))
    if s.error_bars:
        centers = np.array([b[2] + bw / 2 for b in d.bars])
        tops = np.array([b[5] for b in d.bars])
        errs = np.abs(tops) * s.error_frac
        kw = {"fmt": "none", "ecolor": s.error_color, "elinewidth": 1.0, "capsize": 3}
        if d.horizontal:
            ax.errorbar(tops, centers, xerr=errs, **kw)
        else:
            ax.errorbar(centers, tops, yerr=errs, **kw)
    if s.value_label_size:
        _draw_value_labels(d, stacked)
    if n_ser > 1:
        _add_legend(d, handles)
    return lo, hi


def _draw_value_labels(d: Drawn, stacked: bool) -> None:
    """Each bar's cell as printed text (the same string as the table's): centred on its stacked
    segment, or just past the end of a grouped bar; on a white box so it reads over any fill."""
    s, data = d.style, d.data
    prop = _prop(s, s.value_label_size)
    for c, k, x0, x1, v0, v1 in d.bars:
        pos = (x0 + x1) / 2
        out = v1 >= v0  # which way the bar grows from its base
        if stacked:
            value, ha, va = (v0 + v1) / 2, "center", "center"
        elif d.horizontal:
            value, ha, va = v1, ("left" if out else "right"), "center"
        else:
            value, ha, va = v1, "center", ("bottom" if out else "top")
        xy = (value, pos) if d.horizontal else (pos, value)
        d.value_labels.append(
            d.ax.text(
                *xy,
                data.cells[c][k],
                ha=ha,
                va=va,
                fontproperties=prop,
                color=s.text_color,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0},
                clip_on=False,
            )
        )


def _draw_lines(d: Drawn) -> tuple[float, float]:
    s, data, ax = d.style, d.data, d.ax
    vals = data.values()
    pos = np.arange(vals.shape[0], dtype=float)
    handles = []
    lo, hi = float(vals.min()), float(vals.max())
    for k in range(vals.shape[1]):
        kw = {
            "color": s.colors[k],
            "linewidth": s.line_width,
            "linestyle": s.linestyles[k],
            "marker": s.markers[k] or None,
            "markersize": s.marker_size,
        }
        ax.add_line(Line2D(pos, vals[:, k], **kw))
        handles.append(Line2D([], [], **kw))
        d.lines.append([(float(p), float(v)) for p, v in zip(pos, vals[:, k])])
        if s.error_bars:
            err = np.abs(vals[:, k]) * s.error_frac
            ax.errorbar(pos, vals[:, k], yerr=err, fmt="none", ecolor=s.colors[k], capsize=3)
            lo, hi = (
                min(lo, float((vals[:, k] - err).min())),
                max(hi, float((vals[:, k] + err).max())),
            )
    if vals.shape[1] > 1:
        _add_legend(d, handles)
    return lo, hi


def _draw_scatter(d: Drawn) -> tuple[float, float, tuple[float, float]]:
    s, data, ax = d.style, d.data, d.ax
    x = np.array([float(c) for c in data.categories])
    y = data.values()[:, 0]
    ax.add_line(
        Line2D(
            x,
            y,
            linestyle="none",
            marker=s.markers[0] or "o",
            color=s.colors[0],
            markersize=s.marker_size,
        )
    )
    d.points = [(float(a), float(b)) for a, b in zip(x, y)]
    return float(y.min()), float(y.max()), (float(x.min()), float(x.max()))


def _draw_boxes(d: Drawn) -> tuple[float, float]:
    s, data, ax = d.style, d.data, d.ax
    vals = data.values()
    width = s.bar_width * 0.7
    stats = []
    for i, row in enumerate(vals):
        st = dict(zip(("whislo", "q1", "med", "q3", "whishi"), row))
        stats.append({**st, "fliers": np.array(data.fliers[i]) if data.fliers else np.array([])})
        d.boxes.append((float(i), width, width / 2, dict(zip(tb.BOX_STATS, map(float, row)))))
    line = {"color": s.edge_color, "linewidth": max(s.edge_width, 1.0)}
    out = ax.bxp(
        stats,
        positions=np.arange(len(vals)),
        widths=width,
        patch_artist=True,
        orientation="horizontal" if d.horizontal else "vertical",
        manage_ticks=False,
        boxprops={"edgecolor": s.edge_color, "linewidth": line["linewidth"]},
        whiskerprops=line,
        capprops=line,
        medianprops={"color": s.median_color, "linewidth": max(s.line_width * 0.7, 1.5)},
        flierprops={
            "marker": s.flier_marker,
            "markeredgecolor": s.edge_color,
            "markerfacecolor": "none",
            "markersize": 6,
        },
    )
    for patch, color in zip(out["boxes"], s.colors):
        patch.set_facecolor(color)
    every = [v for row in stats for v in (row["whislo"], row["whishi"], *row["fliers"])]
    return float(min(every)), float(max(every))
