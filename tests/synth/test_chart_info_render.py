"""CHART-Info-style generator: every annotated box holds its element's pixels.

Charts are rendered with pinned colours: text pure black, every other stroke grey, each
series/box its own saturated colour; the tests then look for those colours in the image.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from chartjax.synth import chart_info as ci
from chartjax.synth import chart_info_tables as tb
from chartjax.synth.chart_info_geometry import annotate

TYPES = tb.CHART_TYPES  # spelled out and checked in test_chart_info_synth.py
W, H = 1280, 960


# Pinned colours (8-bit), far from each other, from black and from the greys below.
SERIES_RGB = [
    (230, 25, 75),
    (60, 180, 75),
    (0, 130, 200),
    (245, 130, 48),
    (145, 30, 180),
    (70, 240, 240),
    (240, 50, 230),
    (128, 128, 0),
]
GREY = (128, 128, 128)
EDGE = (100, 100, 100)
MEDIAN = (255, 225, 25)


def _f(rgb):
    return tuple(c / 255 for c in rgb)


PINNED = {
    "text_color": (0.0, 0.0, 0.0),
    "colors": tuple(_f(c) for c in SERIES_RGB),
    "hatches": ("",) * 8,
    "edge_width": 0.0,
    "edge_color": _f(EDGE),
    "error_bars": False,
    "markers": ("o",) * 8,
    "linestyles": ("-",) * 8,
    "median_color": _f(MEDIAN),
    "grid_color": _f(GREY),
    "spine_color": _f(GREY),
    "tick_color": _f(GREY),
    "legend_loc": "outside right",
    "legend_edge": _f(GREY),
    "fig_border": 0.0,
    "axes_facecolor": (1.0, 1.0, 1.0),
    "fig_facecolor": (1.0, 1.0, 1.0),
    "flier_marker": "o",
}


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def pinned():
    """Per chart type (except pies): (ChartData, rgb image, task outputs, final Style)."""
    out = {}
    for i, t in enumerate(TYPES[2:]):
        right = i % 3 == 0  # value ticks on the right; the legend then goes on top
        override = dict(
            PINNED,
            value_ticks_right=right,
            cat_rotation=45 if i % 2 else 0,
            legend_loc="outside top" if right else "outside right",
        )
        data, drawn = ci.draw_chart(7, i, types=(t,), style_override=override)
        ann = annotate(drawn)
        out[t] = (data, np.array(drawn.rgba())[..., :3].astype(np.int16), ann, drawn.style)
    return out


# ---------------------------------------------------------------- pixels inside boxes


def _mask(img, rgb, tol=1):
    return np.all(np.abs(img - np.array(rgb)) <= tol, axis=-1)


def _inside(bb, grow=1):
    m = np.zeros((H, W), bool)
    m[
        max(bb["y0"] - grow, 0) : bb["y0"] + bb["height"] + grow + 1,
        max(bb["x0"] - grow, 0) : bb["x0"] + bb["width"] + grow + 1,
    ] = True
    return m


def _legend_region(ann, k):
    pairs = ann["legend_pairs"]
    return _inside(pairs[k]["bb"], grow=8) if k < len(pairs) else np.zeros((H, W), bool)


@pytest.mark.parametrize("ct", TYPES[2:])
def test_text_pixels_inside_text_boxes(pinned, ct):
    _, img, ann, _ = pinned[ct]
    black = _mask(img, (0, 0, 0), tol=0)
    allowed = np.zeros((H, W), bool)
    for b in ann["text_blocks"]:
        box = _inside(b["bb"], grow=0)
        allowed |= box
        dark = np.all(img < 110, axis=-1) & box
        assert dark.any(), (ct, b["text"])  # every text box holds dark text pixels
    assert black.any()
    assert not (black & ~allowed).any(), (ct, np.argwhere(black & ~allowed)[:5])


@pytest.mark.parametrize("ct", [t for t in TYPES if "bar" in t])
def test_bar_pixels_inside_bar_boxes(pinned, ct):
    data, img, ann, style = pinned[ct]
    bars = ann["visual elements"]["bars"]
    n_ser = len(data.series)
    # Bars start on the axis line; the spines and tick marks (grey) are drawn over them.
    plot = ann["_plot_bb"]
    band = math.ceil(style.spine_width) + 2
    frame = ~_inside(plot, grow=-band)
    for k in range(n_ser):
        allowed = _legend_region(ann, k)
        for idx in range(k, len(bars), n_ser):
            allowed |= _inside(bars[idx], grow=0)
            b = bars[idx]
            if b["width"] >= 3 and b["height"] >= 3:  # the interior is the series colour
                inner = np.zeros((H, W), bool)
                inner[
                    b["y0"] + 1 : b["y0"] + b["height"] - 1, b["x0"] + 1 : b["x0"] + b["width"] - 1
                ] = True
                inner &= ~frame
                assert inner.sum() > 0 and _mask(img[inner], SERIES_RGB[k]).all(), (ct, k, idx)
        own = _mask(img, SERIES_RGB[k])
        assert own.any() and not (own & ~allowed).any(), (ct, k)


def _dist_to_polyline(px: np.ndarray, pts: np.ndarray) -> np.ndarray:
    best = np.full(len(px), np.inf)
    for a, b in zip(pts[:-1], pts[1:]):
        ab = b - a
        t = np.clip(((px - a) @ ab) / max(ab @ ab, 1e-9), 0, 1)
        best = np.minimum(best, np.linalg.norm(px - (a + t[:, None] * ab), axis=1))
    return best


def test_line_pixels_follow_annotated_points(pinned):
    data, img, ann, s = pinned["Line"]
    tol = max(s.line_width, s.marker_size) * 100 / 72 / 2 + 1.5
    for k, line in enumerate(ann["visual elements"]["lines"]):
        own = _mask(img, SERIES_RGB[k]) & ~_legend_region(ann, k)
        ys, xs = np.nonzero(own)
        pts = np.array([[p["x"] + 0.5, p["y"] + 0.5] for p in line])
        d = _dist_to_polyline(np.stack([xs + 0.5, ys + 0.5], axis=1), pts)
        assert len(d) and d.max() <= tol, (k, d.max(), tol)


def test_scatter_pixels_near_annotated_points(pinned):
    _, img, ann, style = pinned["Scatter"]
    r = style.marker_size * 100 / 72 / 2 + 1.5
    ys, xs = np.nonzero(_mask(img, SERIES_RGB[0]))
    pts = np.array([[p["x"] + 0.5, p["y"] + 0.5] for p in ann["visual elements"]["scatter points"]])
    px = np.stack([xs + 0.5, ys + 0.5], axis=1)
    d = np.min(np.linalg.norm(px[:, None, :] - pts[None, :, :], axis=-1), axis=1)
    assert len(d) and d.max() <= r
    # and every annotated point is drawn: its pixel has the marker colour
    for p in ann["visual elements"]["scatter points"]:
        assert _mask(img[p["y"] - 1 : p["y"] + 2, p["x"] - 1 : p["x"] + 2], SERIES_RGB[0]).any()


@pytest.mark.parametrize("ct", ["Vertical box", "Horizontal box"])
def test_box_pixels_inside_quartile_boxes(pinned, ct):
    data, img, ann, _ = pinned[ct]
    horizontal = ct.startswith("Horizontal")
    boxes = ann["visual elements"]["boxplots"]
    medians = np.zeros((H, W), bool)
    for k, box in enumerate(boxes):
        q1, q3 = box["first_quartile"], box["third_quartile"]
        x0 = min(q1["_bb"]["x0"], q3["_bb"]["x0"])
        y0 = min(q1["_bb"]["y0"], q3["_bb"]["y0"])
        x1 = max(q1["_bb"]["x0"] + q1["_bb"]["width"], q3["_bb"]["x0"] + q3["_bb"]["width"])
        y1 = max(q1["_bb"]["y0"] + q1["_bb"]["height"], q3["_bb"]["y0"] + q3["_bb"]["height"])
        region = _inside({"x0": x0, "y0": y0, "width": x1 - x0, "height": y1 - y0}, grow=1)
        own = _mask(img, SERIES_RGB[k])
        assert own.any() and not (own & ~region).any(), (ct, k)
        medians |= _inside(box["median"]["_bb"], grow=3)
        for stat in ("min", "max"):  # whisker caps are drawn where annotated
            e = box[stat]
            patch = img[e["y"] - 1 : e["y"] + 2, e["x"] - 1 : e["x"] + 2]
            assert np.any(np.abs(patch - np.array(EDGE)).max(axis=-1) <= 60), (ct, k, stat)
        along = "x" if horizontal else "y"
        order = [
            box[s][along] for s in ("min", "first_quartile", "median", "third_quartile", "max")
        ]
        assert order == sorted(order, reverse=not horizontal)  # image y grows downwards
    med = _mask(img, MEDIAN)
    assert med.any() and not (med & ~medians).any(), ct


def test_legend_marker_boxes_hold_series_colour(pinned):
    for ct in ("Grouped vertical bar", "Stacked horizontal bar", "Line"):
        data, img, ann, _ = pinned[ct]
        pairs = ann["legend_pairs"]
        assert len(pairs) == len(data.series) > 1
        for k, p in enumerate(pairs):
            box = _inside(p["bb"], grow=1)
            assert (_mask(img, SERIES_RGB[k]) & box).any(), (ct, k)
