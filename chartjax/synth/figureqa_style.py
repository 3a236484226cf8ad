"""Appearance of a FigureQA-style figure: size, fonts, gridlines, legend placement, line styles.

Paper §3.1: legend inside or outside the plot by a coin flip, placed where it obstructs least by
counting the occupancy of a 3x3 grid; width 1-2x the height (400 px); four font sizes; gridlines
on or off; all uniform. Outside positions and the horizontal-legend rule (at most 3 entries)
follow the original generator's `common_source_data.yaml`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from chartjax.synth.figureqa_data import CONTINUOUS_TYPES, SourceData

HEIGHT = 400  # px, as the release
DPI = 100
FONT_SIZES = (8, 9, 10, 11)  # pt; the original's legend_label_font_sizes
SIDE_LEGEND_MIN_RATIO = 1.33  # widen figures with a legend on the side (original config)
HORIZONTAL_LEGEND_MAX = 3  # entries; a horizontal legend only for few entries (original config)
LINE_STYLES = ("solid", "dashed", "dotted", "dashdot")

# 3x3 grid cells (row from the top, column from the left) -> matplotlib legend loc. The order
# breaks occupancy ties: corners first, as a reader expects a legend there.
_CELL_LOCS = {
    (0, 2): "upper right",
    (0, 0): "upper left",
    (2, 0): "lower left",
    (2, 2): "lower right",
    (1, 0): "center left",
    (1, 2): "center right",
    (2, 1): "lower center",
    (0, 1): "upper center",
    (1, 1): "center",
}
_GRID = 30  # occupancy samples per axis (10 per cell)


@dataclasses.dataclass(frozen=True)
class Style:
    width: int  # px
    font_size: int  # pt
    gridlines: bool
    legend_inside: bool
    legend_loc: str  # inside: matplotlib loc; outside: 'right' | 'left' | 'below'
    legend_align: str  # outside: 'start' | 'center' | 'end' along the figure edge
    legend_horizontal: bool
    legend_frame: bool
    line_styles: tuple[str, ...] = ()
    bar_width: float = 0.5


def axes_limits(data: SourceData) -> tuple[tuple[float, float], tuple[float, float]]:
    """Data limits (x, y) of the plot area, fixed here so occupancy is known before drawing."""
    if data.figure_type == "pie":
        return (-1.1, 1.1), (-1.1, 1.1)
    if data.figure_type in CONTINUOUS_TYPES:
        ys = np.asarray(data.ys)
        lo, hi = float(ys.min()), float(ys.max())
        pad = 0.06 * (hi - lo)
        return (-2.0, 102.0), (lo - pad, hi + pad)
    n = len(data.values)
    cat = (-0.6, n - 0.4)
    val = (0.0, max(data.values) * 1.08)
    return (cat, val) if data.figure_type == "vbar_categorical" else (val, cat)


def occupancy(data: SourceData, bar_width: float) -> np.ndarray:
    """3x3 counts of grid samples covered by data elements (row 0 = top of the plot)."""
    (x0, x1), (y0, y1) = axes_limits(data)
    u = (np.arange(_GRID) + 0.5) / _GRID
    gx = x0 + u * (x1 - x0)
    gy = y0 + u * (y1 - y0)
    xx, yy = np.meshgrid(gx, gy)  # yy increases with row index (bottom -> top)
    t = data.figure_type
    if t == "pie":
        hit = xx**2 + yy**2 <= 1.0
    elif t in CONTINUOUS_TYPES:
        hit = np.zeros((_GRID, _GRID), bool)
        dense = np.linspace(0.0, 100.0, 400)
        for y in data.ys:
            yd = np.interp(dense, data.x, y)
            col = np.clip(((dense - x0) / (x1 - x0) * _GRID).astype(int), 0, _GRID - 1)
            row = np.clip(((yd - y0) / (y1 - y0) * _GRID).astype(int), 0, _GRID - 1)
            hit[row, col] = True
    else:
        cat, val = (xx, yy) if t == "vbar_categorical" else (yy, xx)
        hit = np.zeros((_GRID, _GRID), bool)
        for i, v in enumerate(data.values):
            hit |= (np.abs(cat - i) <= bar_width / 2) & (val <= v)
    hit = hit[::-1]  # row 0 at the top
    return hit.reshape(3, _GRID // 3, 3, _GRID // 3).sum(axis=(1, 3))


def sample_style(rng: np.random.Generator, data: SourceData) -> Style:
    n_items = len(data.colors)
    ratio = rng.uniform(1.0, 2.0)
    font_size = int(rng.choice(FONT_SIZES))
    gridlines = bool(rng.random() < 0.5)
    # Pies fill their plot area, so an inside legend would always hide slices; as in the
    # original generator, pie legends go outside (the draw is kept so the stream is uniform).
    legend_inside = bool(rng.random() < 0.5) and data.figure_type != "pie"
    legend_frame = bool(rng.random() < 0.5)
    horizontal = n_items <= HORIZONTAL_LEGEND_MAX and bool(rng.random() < 0.5)
    bar_width = float(np.round(rng.uniform(0.4, 0.8), 2))
    if data.figure_type == "line":
        if rng.random() < 0.5:
            line_styles = ("solid",) * n_items
        else:
            perm = [LINE_STYLES[i] for i in rng.permutation(len(LINE_STYLES))]
            line_styles = tuple((perm * n_items)[:n_items])
    else:
        line_styles = ()
    align = "center"
    if legend_inside:
        occ = occupancy(data, bar_width)
        cell = min(_CELL_LOCS, key=lambda rc: occ[rc])  # first of the least occupied, in order
        loc = _CELL_LOCS[cell]
    else:
        if horizontal:
            loc = "below"
        else:
            sides = ("right", "left") if data.figure_type == "pie" else ("right",)
            loc = str(rng.choice(sides))
            if ratio < SIDE_LEGEND_MIN_RATIO:  # room for the side legend
                ratio = rng.uniform(SIDE_LEGEND_MIN_RATIO, 2.0)
        align = str(rng.choice(("start", "center", "end")))
    return Style(
        width=int(ratio * HEIGHT),
        font_size=font_size,
        gridlines=gridlines,
        legend_inside=legend_inside,
        legend_loc=loc,
        legend_align=align,
        legend_horizontal=horizontal,
        legend_frame=legend_frame,
        line_styles=line_styles,
        bar_width=bar_width,
    )
