"""Render a FigureQA-style figure with matplotlib (Agg) and extract its bounding boxes.

Boxes come from matplotlib's own geometry after the draw (renderer window extents and artist
transforms), converted to image pixels with y = 0 at the top, in the real-file shape of
FigureQA's `annotations.json` (docs/corpora.md §4.5).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from chartjax.synth.agg_canvas import ReusedCanvas
from chartjax.synth.figureqa_data import CONTINUOUS_TYPES, SourceData
from chartjax.synth.figureqa_layout import (
    LINE_WIDTH,
    MARKER_SIZE,
    PT,
    draw_legend,
    fits_inside,
    inches,
    labels_too_wide,
    legend_size,
    nice_ticks,
    place_axes,
    position_legend,
)
from chartjax.synth.figureqa_style import (
    DPI,
    HEIGHT,
    SIDE_LEGEND_MIN_RATIO,
    Style,
    axes_limits,
)
from chartjax.synth.png_encode import DEFAULT_LEVEL, png_bytes

MAX_WIDTH = 2 * HEIGHT  # widest figure (sample_style: width = ratio * HEIGHT, ratio < 2)


@dataclasses.dataclass
class _Reused:
    """The process's figure, canvas and axes, and the settings the last figure left on the
    axes (so only what changed is set again: every tick-setting call touches every tick)."""

    fig: Figure
    canvas: ReusedCanvas
    ax: object
    grid: bool = False
    rotated: bool = False
    labelsize: float | None = None


@functools.cache
def _reused() -> _Reused:
    """One figure, canvas and axes per process, emptied per figure (figures are drawn one at a
    time per process). Creating an Axes and its ticks cost about a third of a figure's time."""
    fig = Figure(figsize=(inches(HEIGHT), inches(HEIGHT)), dpi=DPI)
    fig.patch.set_facecolor("white")
    canvas = ReusedCanvas(fig, min_width=MAX_WIDTH)  # keeps text caches across widths
    return _Reused(fig, canvas, fig.add_axes((0.1, 0.1, 0.8, 0.8)))


def _reset(r: _Reused) -> None:
    """Removes the previous figure's artists and undoes every setting that `render` makes only
    for some figures, so a figure never depends on the one drawn before it (the determinism
    test compares worker counts; the tick label size is set by every figure with axes)."""
    fig, ax = r.fig, r.ax
    for artist in [*ax.lines, *ax.patches, *ax.collections, *ax.texts, *ax.artists, *fig.artists]:
        artist.remove()
    ax.containers.clear()  # in case a plotting call registered one; its artists are gone
    ax.set_aspect("auto")  # pie
    ax.set_axis_on()  # pie
    ax.set_frame_on(True)  # pie
    if r.grid:
        ax.grid(False)
        r.grid = False
    if r.rotated:
        ax.tick_params(axis="x", labelrotation=0)
        r.rotated = False


def _box(bb, height: float) -> dict:
    """A display-space Bbox (y up) -> FigureQA bbox dict (pixels, y = 0 at the top)."""
    return {
        "x": round(float(bb.x0), 3),
        "y": round(float(height - bb.y1), 3),
        "w": round(float(bb.width), 3),
        "h": round(float(bb.height), 3),
    }


def _xy_box(x0: float, y0: float, x1: float, y1: float, height: float) -> dict:
    return {
        "x": round(float(x0), 3),
        "y": round(float(height - y1), 3),
        "w": round(float(x1 - x0), 3),
        "h": round(float(y1 - y0), 3),
    }


def _text(artist, renderer, height: float) -> dict:
    return {"text": artist.get_text(), "bbox": _box(artist.get_window_extent(renderer), height)}


def _axis_info(axis, spine, renderer, height: float, lim: tuple[float, float]) -> dict:
    labels, label_boxes, tick_boxes = [], [], []
    locs = axis.get_majorticklocs()
    lo, hi = min(lim), max(lim)
    eps = 1e-9 * max(1.0, hi - lo)
    for loc, tick in zip(locs, axis.get_major_ticks(len(locs))):
        if not lo - eps <= loc <= hi + eps:
            continue  # ticks outside the view are not drawn
        labels.append(tick.label1.get_text())
        label_boxes.append(_box(tick.label1.get_window_extent(renderer), height))
        tick_boxes.append(_box(tick.tick1line.get_window_extent(renderer), height))
    return {
        "label": _text(axis.label, renderer, height),
        "major_labels": {"values": labels, "bboxes": label_boxes},
        "major_ticks": {"values": list(labels), "bboxes": tick_boxes},
        "minor_ticks": {"values": [], "bboxes": []},
        "rule": {"bbox": _box(spine.get_window_extent(renderer), height)},
    }


def _gridlines(axis, renderer, height: float, lim: tuple[float, float]) -> dict:
    values, boxes = [], []
    locs = axis.get_majorticklocs()
    lo, hi = min(lim), max(lim)
    eps = 1e-9 * max(1.0, hi - lo)
    for loc, tick in zip(locs, axis.get_major_ticks(len(locs))):
        if lo - eps <= loc <= hi + eps and tick.gridline.get_visible():
            values.append(tick.label1.get_text())
            boxes.append(_box(tick.gridline.get_window_extent(renderer), height))
    return {"values": values, "bboxes": boxes}


def _bars(ax, values, bar_width: float, colors: list[str], vertical: bool) -> list[Rectangle]:
    """The rectangles `Axes.bar`/`barh` would draw (same geometry and style: centred on the
    category index, from 0), added without `bar`'s data-limit bookkeeping, a costly path
    extent per bar that is useless here (the view limits are fixed)."""
    bars = []
    for i, (value, color) in enumerate(zip(values, colors)):
        lo = i - bar_width / 2
        if vertical:
            rect = Rectangle((lo, 0), bar_width, value, facecolor=color, label="_nolegend_")
        else:
            rect = Rectangle((0, lo), value, bar_width, facecolor=color, label="_nolegend_")
        bars.append(ax.add_artist(rect))
    return bars


def render(data: SourceData, style: Style) -> tuple[bytes, list[dict], dict]:
    """Draw the figure. Returns (PNG bytes, `models`, `general_figure_info`)."""
    reused = _reused()
    _reset(reused)
    fig, canvas, ax = reused.fig, reused.canvas, reused.ax
    fig.set_size_inches(inches(style.width), inches(HEIGHT))
    fs = style.font_size
    t = data.figure_type
    names = [c.name for c in data.colors]
    hexes = [c.hex for c in data.colors]
    xlim, ylim = axes_limits(data)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    # An explicit y turns off matplotlib's automatic title placement (a costly search for
    # overlapping top ticks; there are none here).
    ax.set_title("title", fontsize=fs + 2, y=1.0, pad=6.0)
    ax.set_axisbelow(True)

    texts: dict = {}
    if t == "pie":
        ax.set_aspect("equal")
        ax.set_axis_off()
        wedges, _ = ax.pie(data.values, colors=hexes, startangle=0.0, counterclock=True)
        ax.set_xlim(*xlim)
        ax.set_ylim(*ylim)
        handles = list(wedges)
    else:
        if t in CONTINUOUS_TYPES:
            handles = []
            for i, y in enumerate(data.ys):
                if t == "line":
                    kw = dict(linestyle=style.line_styles[i], linewidth=LINE_WIDTH)
                else:
                    kw = dict(linestyle="none", marker="o", markersize=MARKER_SIZE)
                (h,) = ax.plot(data.x, y, color=hexes[i], **kw)
                handles.append(h)
            xt, yt = nice_ticks(*xlim, 6), nice_ticks(*ylim, 6)
        else:
            pos = list(range(len(data.values)))
            vertical = t == "vbar_categorical"
            handles = _bars(ax, data.values, style.bar_width, hexes, vertical)
            if vertical:
                xt, yt = (pos, names), nice_ticks(*ylim, 6)
            else:
                xt, yt = nice_ticks(*xlim, 6), (pos, names)
        ax.set_xticks(*xt)
        ax.set_yticks(*yt)
        ax.set_xlim(*xlim)
        ax.set_ylim(*ylim)
        ax.set_xlabel("xaxis_label", fontsize=fs)
        ax.set_ylabel("yaxis_label", fontsize=fs)
        if reused.labelsize != fs:
            ax.tick_params(labelsize=fs)
            reused.labelsize = fs
        ax.spines["top"].set_visible(False)
        ax.spines["right"].set_visible(False)
        rotated = t == "vbar_categorical" and labels_too_wide(names, fs, style.width)
        if rotated:
            ax.tick_params(axis="x", labelrotation=90)
            reused.rotated = True
        texts = {"x": xt[1], "y": yt[1], "x_rotated": rotated, "x_numeric": t != "vbar_categorical"}
        if style.gridlines:
            # Bars: grid along the value axis only (lines through categories carry nothing).
            which = {"vbar_categorical": "y", "hbar_categorical": "x"}.get(t, "both")
            ax.grid(True, axis=which, color="#D9D9D9", linewidth=0.8)
            reused.grid = True

    # Legend swatches: filled patches for bars and pies, the line style or the marker for curves.
    kinds = {"line": list(style.line_styles), "dot_line": ["marker"] * len(names)}.get(
        t, ["patch"] * len(names)
    )
    legend = legend_size(names, style, style.width)
    axes_px = place_axes(fig, ax, legend, style, texts)
    if style.legend_inside and not fits_inside(legend, axes_px):
        # A long legend would bury the data (e.g. 10 bars): move it to the right edge.
        width = max(style.width, int(SIDE_LEGEND_MIN_RATIO * HEIGHT))  # as sample_style
        style = dataclasses.replace(
            style, legend_inside=False, legend_loc="right", legend_align="center", width=width
        )
        fig.set_size_inches(inches(width), inches(HEIGHT))
        legend = legend_size(names, style, style.width)
        axes_px = place_axes(fig, ax, legend, style, texts)
    position_legend(legend, style, style.width, axes_px)
    draw_legend(fig, legend, names, hexes, kinds, style)
    canvas.draw()
    renderer = canvas.get_renderer()
    height = float(HEIGHT)  # raster rows; y = 0 at the top

    models = _models(data, style, ax, handles, renderer, height)
    info: dict = {
        "title": _text(ax.title, renderer, height),
        "figure_info": {"bbox": {"bbox": {"x": 0, "y": 0, "w": style.width, "h": HEIGHT}}},
        "plot_info": {"bbox": _box(ax.get_window_extent(renderer), height)},
    }
    if t != "pie":
        info["x_axis"] = _axis_info(ax.xaxis, ax.spines["bottom"], renderer, height, xlim)
        info["y_axis"] = _axis_info(ax.yaxis, ax.spines["left"], renderer, height, ylim)
        if style.gridlines:
            if t != "vbar_categorical":
                info["x_gridlines"] = _gridlines(ax.xaxis, renderer, height, xlim)
            if t != "hbar_categorical":
                info["y_gridlines"] = _gridlines(ax.yaxis, renderer, height, ylim)
    lx, ly = legend.x0, legend.y0
    info["legend"] = {
        "bbox": _xy_box(lx, ly, lx + legend.width, ly + legend.height, height),
        "items": [
            {
                "model": name,
                "label": _text(text, renderer, height),
                "preview": {"bbox": _box(swatch.get_window_extent(renderer), height)},
            }
            for name, text, swatch in zip(names, legend.texts, legend.swatches)
        ],
    }

    size = canvas.get_width_height(physical=True)
    if size != (style.width, HEIGHT):
        raise RuntimeError(f"rendered {size} (width, height), expected {(style.width, HEIGHT)}")
    rgba = canvas.rgba()
    return encode_png(rgba[:, :, :3]), models, info


def encode_png(rgb: np.ndarray, level: int = DEFAULT_LEVEL) -> bytes:
    """8-bit RGB PNG with filter type 0 on every row (`png_encode` says why hand-written);
    `rgb` may be a strided view, e.g. the RGB channels of an RGBA buffer."""
    h, w, _ = rgb.shape
    raw = np.empty((h, w * 3 + 1), np.uint8)
    raw[:, 0] = 0  # leading byte per row: filter "None"
    pixels = raw[:, 1:].reshape(h, w, 3)  # a view of `raw`
    for c in range(3):  # one channel at a time: numpy copies these 2-D strides ~8x faster
        pixels[:, :, c] = rgb[:, :, c]
    return png_bytes(raw, w, 3, level)


def _models(data: SourceData, style: Style, ax, handles, renderer, height: float) -> list[dict]:
    t = data.figure_type
    names = [c.name for c in data.colors]
    hexes = [c.hex for c in data.colors]
    if t in ("vbar_categorical", "hbar_categorical"):
        boxes = [_box(h.get_window_extent(renderer), height) for h in handles]
        cat, val = list(names), list(data.values)
        x, y = (cat, val) if t == "vbar_categorical" else (val, cat)
        return [
            {
                "name": "bars",
                "labels": list(names),
                "colors": list(hexes),
                "bboxes": boxes,
                "x": x,
                "y": y,
                "width": style.bar_width,
            }
        ]
    if t == "pie":
        start = 0.0
        models = []
        for name, hexcode, span, wedge in zip(names, hexes, data.values, handles):
            models.append(
                {
                    "name": name,
                    "label": name,
                    "color": hexcode,
                    "bbox": _box(wedge.get_window_extent(renderer), height),
                    "span": span,
                    "start": start,
                    "end": start + span,
                }
            )
            start += span
        return models
    models = []
    for name, hexcode, y, line in zip(names, hexes, data.ys, handles):
        pts = line.get_transform().transform(np.column_stack([data.x, y]))
        if t == "line":
            pad = line.get_linewidth() * PT / 2  # half the stroke width
            seg = [
                _xy_box(
                    min(a[0], b[0]) - pad,
                    min(a[1], b[1]) - pad,
                    max(a[0], b[0]) + pad,
                    max(a[1], b[1]) + pad,
                    height,
                )
                for a, b in zip(pts[:-1], pts[1:])
            ]
        else:
            r = line.get_markersize() * PT / 2
            seg = [_xy_box(p[0] - r, p[1] - r, p[0] + r, p[1] + r, height) for p in pts]
        models.append(
            {
                "name": name,
                "label": name,
                "color": hexcode,
                "bboxes": seg,
                "x": list(data.x),
                "y": list(y),
            }
        )
    return models
