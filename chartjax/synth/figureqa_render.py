"""Render a FigureQA-style figure with matplotlib (Agg) and extract its bounding boxes.

Boxes come from matplotlib's own geometry after the draw (renderer window extents and artist
transforms), converted to image pixels with y = 0 at the top, in the real-file shape of
FigureQA's `annotations.json` (reference corpora.md §4.5).
"""

from __future__ import annotations

import dataclasses
import struct
import zlib

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

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

PNG_COMPRESS_LEVEL = 1  # zlib level: fast, and files stay small (flat colours)


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


def render(data: SourceData, style: Style) -> tuple[bytes, list[dict], dict]:
    """Draw the figure. Returns (PNG bytes, `models`, `general_figure_info`)."""
    fig = Figure(figsize=(inches(style.width), inches(HEIGHT)), dpi=DPI)
    fig.patch.set_facecolor("white")
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_axes((0.1, 0.1, 0.8, 0.8))
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
            pos = np.arange(len(data.values))
            if t == "vbar_categorical":
                bars = ax.bar(pos, data.values, width=style.bar_width, color=hexes)
                xt, yt = (pos.tolist(), names), nice_ticks(*ylim, 6)
            else:
                bars = ax.barh(pos, data.values, height=style.bar_width, color=hexes)
                xt, yt = nice_ticks(*xlim, 6), (pos.tolist(), names)
            handles = list(bars.patches)
        ax.set_xticks(*xt)
        ax.set_yticks(*yt)
        ax.set_xlim(*xlim)
        ax.set_ylim(*ylim)
        ax.set_xlabel("xaxis_label", fontsize=fs)
        ax.set_ylabel("yaxis_label", fontsize=fs)
        ax.tick_params(labelsize=fs)
        ax.spines["top"].set_visible(False)
        ax.spines["right"].set_visible(False)
        rotated = t == "vbar_categorical" and labels_too_wide(names, fs, style.width)
        if rotated:
            ax.tick_params(axis="x", labelrotation=90)
        texts = {"x": xt[1], "y": yt[1], "x_rotated": rotated, "x_numeric": t != "vbar_categorical"}
        if style.gridlines:
            # Bars: grid along the value axis only (lines through categories carry nothing).
            which = {"vbar_categorical": "y", "hbar_categorical": "x"}.get(t, "both")
            ax.grid(True, axis=which, color="#D9D9D9", linewidth=0.8)

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

    rgba = np.asarray(canvas.buffer_rgba())
    if rgba.shape != (HEIGHT, style.width, 4):
        raise RuntimeError(f"rendered {rgba.shape[:2]}, expected {(HEIGHT, style.width)}")
    return encode_png(rgba[:, :, :3]), models, info


def encode_png(rgb: np.ndarray, level: int = PNG_COMPRESS_LEVEL) -> bytes:
    """8-bit RGB PNG with filter type 0 on every row.

    Hand-written because Pillow's encoder always runs adaptive row filtering, which took ~3x
    longer than the whole zlib pass here for a few percent smaller files; rendering speed
    matters more for a 100k-figure corpus. Output is a standard PNG (any decoder reads it).
    """
    h, w, _ = rgb.shape
    raw = np.zeros((h, w * 3 + 1), np.uint8)  # leading 0 byte per row: filter "None"
    raw[:, 1:] = rgb.reshape(h, w * 3)

    def chunk(kind: bytes, payload: bytes) -> bytes:
        crc = zlib.crc32(kind + payload)
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)  # 8 bit, colour type 2 (RGB)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw.tobytes(), level))
        + chunk(b"IEND", b"")
    )


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
