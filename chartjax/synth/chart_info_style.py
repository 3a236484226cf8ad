"""Randomized drawing styles for the CHART-Info-style generator.

A `Style` holds every visual choice; `sample_style` draws one from a numpy Generator. Every
colour the renderer uses comes from a field here, so tests can pin colours (pure-black text on a
chart whose other strokes are grey) and check pixels against the annotations.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from matplotlib import colormaps, font_manager

from chartjax.synth import chart_info_tables as tb

RGB = tuple[float, float, float]

# Fonts bundled with matplotlib (no system fonts, so output is identical on every machine).
FONTS = ("DejaVu Sans", "DejaVu Serif", "DejaVu Sans Mono", "STIXGeneral")
PALETTES = ("tab10", "Set1", "Set2", "Dark2", "Paired", "Accent", "tab20b", "Pastel1")
HATCHES = ("/", "\\", "x", "-", "+", ".", "//")
MARKERS = ("o", "s", "^", "D", "v", "*", "x", "+")
LINESTYLES = ("-", "-", "-", "--", "-.", ":")
LEGEND_INSIDE = (
    "upper right",
    "upper left",
    "lower right",
    "lower left",
    "upper center",
    "center right",
)
LEGEND_OUTSIDE = ("outside right", "outside top")


@dataclasses.dataclass(frozen=True)
class Style:
    width: int = 1280  # the 2019 images are 1280 x 960
    height: int = 960
    font: str = "DejaVu Sans"
    title_size: float = 14.0
    label_size: float = 11.0
    tick_size: float = 10.0
    legend_size: float = 10.0
    show_title: bool = True
    title_loc: str = "center"  # left / center / right
    show_x_title: bool = True  # independent-variable axis title
    show_y_title: bool = True  # value axis title
    text_color: RGB = (0.0, 0.0, 0.0)
    colors: tuple[RGB, ...] = ((0.12, 0.47, 0.71),)  # one per series (pie/box: per category)
    hatches: tuple[str, ...] = ("",)
    edge_color: RGB = (0.0, 0.0, 0.0)
    edge_width: float = 0.0
    bar_width: float = 0.8  # fraction of a category slot taken by its bar group
    line_width: float = 2.0
    markers: tuple[str, ...] = ("",)
    marker_size: float = 6.0
    linestyles: tuple[str, ...] = ("-",)
    median_color: RGB = (1.0, 0.5, 0.05)
    flier_marker: str = "o"
    grid: str = "none"  # none / x / y / both
    grid_color: RGB = (0.8, 0.8, 0.8)
    grid_style: str = "-"
    spines: str = "box"  # box / open (left + bottom) / none
    spine_color: RGB = (0.0, 0.0, 0.0)
    spine_width: float = 1.0
    tick_color: RGB = (0.0, 0.0, 0.0)
    tick_length: float = 4.0
    value_ticks: int = 6  # MaxNLocator bins on value axes
    value_ticks_right: bool = False
    thousands: bool = True  # "12,500" rather than "12500"
    cat_rotation: int = 0  # category tick labels on a horizontal axis
    axes_facecolor: RGB = (1.0, 1.0, 1.0)
    fig_facecolor: RGB = (1.0, 1.0, 1.0)
    fig_border: float = 0.0  # width of a frame around the whole image (0: none)
    legend_loc: str = "upper right"
    legend_frame: bool = True
    legend_edge: RGB = (0.8, 0.8, 0.8)
    legend_ncol: int = 1
    error_bars: bool = False
    error_frac: float = 0.1
    error_color: RGB = (0.2, 0.2, 0.2)
    pie_radius: float = 1.0
    donut_width: float = 0.4
    start_angle: float = 90.0
    counterclock: bool = True
    pie_labels: bool = True
    pie_pct: bool = False
    pie_legend: bool = False
    # Not drawn by sample_style (the 2019 release prints no values): the generator's
    # --value-labels sets it. > 0: every bar carries its cell as text of this point size.
    value_label_size: float = 0.0
    # Not drawn by sample_style either (--text-grid): > 0 moves the value and category labels'
    # boxes to the nearest multiple of this many pixels, so that at a patch grid of that side
    # each of those texts sits at one phase of its patches (chart_info_render.snap_texts).
    text_grid: int = 0


@functools.cache
def font_file(family: str) -> str:
    return font_manager.findfont(
        font_manager.FontProperties(family=family), fallback_to_default=False
    )


def font(style: Style, size: float) -> font_manager.FontProperties:
    """The style's font at `size` points, by file: skips Matplotlib's font search per text."""
    return font_manager.FontProperties(fname=font_file(style.font), size=size)


def _pt(x: float) -> float:
    return round(x * 2) / 2  # half-point sizes keep Matplotlib's text-metrics cache warm


def _colors(rng: np.random.Generator, n: int) -> tuple[RGB, ...]:
    if rng.random() < 0.75:
        cmap = colormaps[PALETTES[rng.integers(len(PALETTES))]]
        base = [tuple(float(c) for c in cmap(i)[:3]) for i in range(cmap.N)]
        if len(base) >= n:
            idx = rng.choice(len(base), size=n, replace=False)
            return tuple(base[i] for i in idx)
    # Random hues, evenly spaced so series stay distinguishable; never near-white.
    hue0 = rng.random()
    out = []
    for i in range(n):
        h = (hue0 + i / n) % 1.0
        s, v = rng.uniform(0.45, 1.0), rng.uniform(0.35, 0.9)
        out.append(_hsv(h, s, v))
    return tuple(out)


def _hsv(h: float, s: float, v: float) -> RGB:
    i = int(h * 6) % 6
    f = h * 6 - int(h * 6)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    return [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i]


def _gray(rng: np.random.Generator, lo: float, hi: float) -> RGB:
    g = float(rng.uniform(lo, hi))
    return (g, g, g)


def sample_style(rng: np.random.Generator, data: tb.ChartData) -> Style:
    """Draws a style for `data` (colour counts follow its series or categories)."""
    ct = data.chart_type
    per_category = ct in (tb.PIE, tb.DONUT) or ct in tb.BOX_TYPES
    n_colors = len(data.categories) if per_category else len(data.series)
    n_series = len(data.series)
    dark = _gray(rng, 0.0, 0.3)
    hatch = rng.random() < 0.15 and ct in tb.BAR_TYPES
    base = float(rng.uniform(9, 13))
    legend_loc = (
        LEGEND_OUTSIDE[rng.integers(len(LEGEND_OUTSIDE))]
        if rng.random() < 0.4
        else LEGEND_INSIDE[rng.integers(len(LEGEND_INSIDE))]
    )
    value_ticks_right = bool(rng.random() < 0.1)
    if value_ticks_right and legend_loc == "outside right":
        legend_loc = "outside top"  # keep the legend clear of the right-hand axis
    ncol = 1 if legend_loc != "outside top" else min(n_series, 4)
    if legend_loc in LEGEND_INSIDE and rng.random() < 0.3:
        ncol = min(n_series, 2)
    return Style(
        font=FONTS[rng.integers(len(FONTS))],
        title_size=_pt(base + rng.uniform(1, 7)),
        label_size=_pt(base + rng.uniform(-1, 2)),
        tick_size=_pt(base + rng.uniform(-2, 0.5)),
        legend_size=_pt(base + rng.uniform(-2, 0.5)),
        show_title=bool(rng.random() < 0.95),
        title_loc=("center", "center", "left", "right")[rng.integers(4)],
        show_x_title=bool(rng.random() < 0.85),
        show_y_title=bool(rng.random() < 0.85),
        text_color=dark if rng.random() < 0.7 else (0.0, 0.0, 0.0),
        colors=_colors(rng, n_colors),
        hatches=tuple(
            HATCHES[rng.integers(len(HATCHES))] if hatch else "" for _ in range(n_series)
        ),
        edge_color=dark,
        edge_width=float(rng.choice([0.0, 0.0, 0.5, 1.0, 1.5])),
        bar_width=float(rng.uniform(0.5, 0.9)),
        line_width=float(rng.uniform(1.0, 3.5)),
        markers=tuple(
            MARKERS[rng.integers(len(MARKERS))] if rng.random() < 0.5 else ""
            for _ in range(n_series)
        ),
        marker_size=float(rng.uniform(4, 9)),
        linestyles=tuple(LINESTYLES[rng.integers(len(LINESTYLES))] for _ in range(n_series)),
        median_color=_colors(rng, 1)[0] if rng.random() < 0.5 else dark,
        flier_marker=("o", "D", "x", "+", "*")[rng.integers(5)],
        grid=("none", "none", "x", "y", "y", "both")[rng.integers(6)],
        grid_color=_gray(rng, 0.7, 0.92),
        grid_style=("-", "--", ":")[rng.integers(3)],
        spines=("box", "box", "open", "none")[rng.integers(4)],
        spine_color=dark,
        spine_width=float(rng.uniform(0.6, 2.0)),
        tick_color=dark,
        tick_length=float(rng.uniform(2.5, 7)),
        value_ticks=int(rng.integers(4, 9)),
        value_ticks_right=value_ticks_right,
        thousands=bool(rng.random() < 0.7),
        cat_rotation=int(rng.choice([0, 0, 0, 30, 45, 90])),
        axes_facecolor=(1.0, 1.0, 1.0) if rng.random() < 0.85 else _gray(rng, 0.92, 0.97),
        fig_border=float(rng.choice([0.0] * 6 + [1.0, 2.0])),
        legend_loc=legend_loc,
        legend_frame=bool(rng.random() < 0.7),
        legend_edge=_gray(rng, 0.5, 0.85),
        legend_ncol=int(ncol),
        error_bars=bool(rng.random() < 0.2) and ct in (tb.GROUPED_VBAR, tb.GROUPED_HBAR, tb.LINE),
        error_frac=float(rng.uniform(0.03, 0.15)),
        error_color=dark,
        pie_radius=float(rng.uniform(0.6, 1.0)),
        donut_width=float(rng.uniform(0.25, 0.55)),
        start_angle=float(rng.uniform(0, 360)),
        counterclock=bool(rng.random() < 0.5),
        pie_labels=bool(rng.random() < 0.7),
        pie_pct=bool(rng.random() < 0.4),
        pie_legend=bool(rng.random() < 0.5),
    )
