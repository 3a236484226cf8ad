"""Layout of a FigureQA-style figure, computed from text metrics before the single draw.

matplotlib's automatic layout (tight_layout, title/axis-label placement, Legend's offset boxes)
lays the figure out again at every draw; for a 100k-figure corpus that was half the rendering
time. Here tick labels are fixed in advance, text is measured once with matplotlib's own font
metrics, and the axes, axis labels and legend get explicit pixel positions.

The legend is drawn from plain artists (frame Rectangle, swatch patch or line, Text) because
matplotlib's Legend cost ~30% of a figure's rendering time (its offset-box layout runs on every
draw); the look follows matplotlib's defaults (paddings in font-size units).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import IdentityTransform

from chartjax.synth.agg_canvas import CachingRendererAgg
from chartjax.synth.figureqa_style import DPI, HEIGHT, Style

PT = DPI / 72.0  # px per point
EDGE = 4.0  # px kept free at the figure edges
LINE_WIDTH = 2.0  # pt
MARKER_SIZE = 6.0  # pt
# Text measurement only (metrics do not depend on its size); it caches font look-ups.
_METRICS = CachingRendererAgg(8, 8, DPI)
_TEXT_SIZES: dict[tuple[str, float], tuple[float, float]] = {}
_LP_HEIGHTS: dict[float, float] = {}  # height of "lp" (matplotlib's minimum line height) by size
# matplotlib Legend defaults, in font-size units
_BORDER_PAD, _HANDLE_LEN, _HANDLE_H, _TEXT_PAD = 0.4, 1.6, 0.7, 0.8
_LABEL_SPACING, _COLUMN_SPACING, _AXES_PAD = 0.5, 1.5, 0.5


def inches(px: int) -> float:
    """Figure size in inches whose product with DPI is px up to float rounding, never below
    (Agg truncates the pixel size to an integer; text and paths then share one y origin)."""
    size = px / DPI
    while size * DPI < px:
        size = float(np.nextafter(size, np.inf))
    return size


def text_size(text: str, size: float) -> tuple[float, float]:
    """(width, height) in px of one line of text, from matplotlib's font metrics."""
    key = (text, size)
    if key not in _TEXT_SIZES:
        prop = FontProperties(size=size)
        w, h, _ = _METRICS.get_text_width_height_descent(text, prop, False)
        if size not in _LP_HEIGHTS:
            _LP_HEIGHTS[size] = _METRICS.get_text_width_height_descent("lp", prop, False)[1]
        _TEXT_SIZES[key] = (float(w), float(max(h, _LP_HEIGHTS[size])))
    return _TEXT_SIZES[key]


def nice_ticks(lo: float, hi: float, nbins: int) -> tuple[list[float], list[str]]:
    """Tick positions inside [lo, hi] and their labels (matplotlib's MaxNLocator steps)."""
    locs = MaxNLocator(nbins=nbins, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
    eps = 1e-9 * (hi - lo)
    locs = [float(v) for v in locs if lo - eps <= v <= hi + eps]
    step = locs[1] - locs[0] if len(locs) > 1 else 1.0
    decimals = max(0, -int(np.floor(np.log10(step) + 1e-9))) if step < 1 else 0
    if decimals == 0 and any(abs(v - round(v)) > 1e-9 for v in locs):
        decimals = 1  # steps of 2.5
    labels = [f"{0.0 if abs(v) < 1e-12 else v:.{decimals}f}" for v in locs]
    return locs, labels


def labels_too_wide(names: list[str], fs: int, width: int) -> bool:
    """Whether horizontal category labels would collide on an axis of about half the width."""
    need = sum(text_size(n, fs)[0] + 0.6 * fs * PT for n in names)
    return need > 0.5 * width


# ---------------------------------------------------------------- legend


@dataclasses.dataclass
class Legend:
    """Legend geometry in display pixels (y up) and, once drawn, its artists."""

    width: float
    height: float
    horizontal: bool
    x0: float = 0.0
    y0: float = 0.0
    texts: list = dataclasses.field(default_factory=list)
    swatches: list = dataclasses.field(default_factory=list)


def legend_size(names: list[str], style: Style, fig_width: int) -> Legend:
    em = style.font_size * PT
    sizes = [text_size(n, style.font_size) for n in names]
    row_h = max(max(h for _, h in sizes), _HANDLE_H * em)
    item_w = [(_HANDLE_LEN + _TEXT_PAD) * em + w for w, _ in sizes]
    pad = 2 * _BORDER_PAD * em
    if style.legend_horizontal:
        width = sum(item_w) + _COLUMN_SPACING * em * (len(names) - 1) + pad
        if width <= fig_width - 2 * EDGE:
            return Legend(width, row_h + pad, True)
    height = len(names) * row_h + (len(names) - 1) * _LABEL_SPACING * em + pad
    return Legend(max(item_w) + pad, height, False)


def fits_inside(legend: Legend, axes_px: tuple[float, ...], share: float = 0.6) -> bool:
    """Whether the legend leaves most of the plot area free (at most `share` of each side)."""
    x0, y0, x1, y1 = axes_px
    return legend.width <= share * (x1 - x0) and legend.height <= share * (y1 - y0)


def outside_strip(legend: Legend, style: Style) -> tuple[float, float, float, float]:
    """Pixels (left, bottom, right, top) an outside legend takes from the figure edges."""
    if style.legend_inside:
        return 0.0, 0.0, 0.0, 0.0
    gap = 6.0
    if style.legend_loc == "below":
        return 0.0, legend.height + EDGE + gap, 0.0, 0.0
    if style.legend_loc == "right":
        return 0.0, 0.0, legend.width + EDGE + gap, 0.0
    return legend.width + EDGE + gap, 0.0, 0.0, 0.0


def position_legend(legend: Legend, style: Style, fig_width: int, axes_px) -> None:
    """Inside: the chosen 3x3 cell of the plot area; outside: along the chosen figure edge."""
    w, h = legend.width, legend.height
    if style.legend_inside:
        ax0, ay0, ax1, ay1 = axes_px
        pad = _AXES_PAD * style.font_size * PT
        vert, _, horiz = style.legend_loc.partition(" ")
        if style.legend_loc == "center":
            vert = horiz = "center"
        elif vert in ("left", "right"):
            vert, horiz = "center", vert
        legend.x0 = {"left": ax0 + pad, "center": (ax0 + ax1 - w) / 2, "right": ax1 - pad - w}[
            horiz or "center"
        ]
        legend.y0 = {"lower": ay0 + pad, "center": (ay0 + ay1 - h) / 2, "upper": ay1 - pad - h}[
            vert
        ]
        return
    k = ("start", "center", "end").index(style.legend_align)
    if style.legend_loc == "below":
        legend.x0 = (EDGE, (fig_width - w) / 2, fig_width - EDGE - w)[k]
        legend.y0 = EDGE
    else:
        legend.x0 = fig_width - EDGE - w if style.legend_loc == "right" else EDGE
        y = (0.9 * HEIGHT - h, (HEIGHT - h) / 2, 0.1 * HEIGHT)[k]
        legend.y0 = min(max(y, EDGE), HEIGHT - EDGE - h)


def draw_legend(fig, legend: Legend, names, colors, kinds, style: Style) -> None:
    """Add the legend's artists to the figure (pixel coordinates, above the axes).

    kinds[i]: 'patch' (bars, pie), or a matplotlib linestyle (line plots), or 'marker'.
    """
    em = style.font_size * PT
    ident = IdentityTransform()
    if style.legend_frame:
        fig.add_artist(
            Rectangle(
                (legend.x0, legend.y0),
                legend.width,
                legend.height,
                transform=ident,
                facecolor="white",
                edgecolor="#CCCCCC",
                linewidth=0.8,
                zorder=5,
            )
        )
    row_h = legend.height - 2 * _BORDER_PAD * em
    if not legend.horizontal:
        row_h = (row_h - (len(names) - 1) * _LABEL_SPACING * em) / len(names)
    x = legend.x0 + _BORDER_PAD * em
    y_top = legend.y0 + legend.height - _BORDER_PAD * em
    for name, color, kind in zip(names, colors, kinds):
        yc = y_top - row_h / 2
        hl = _HANDLE_LEN * em
        if kind == "patch":
            hh = _HANDLE_H * em
            swatch = Rectangle((x, yc - hh / 2), hl, hh, facecolor=color, transform=ident)
        elif kind == "marker":
            swatch = Line2D(
                [x + hl / 2],
                [yc],
                color=color,
                marker="o",
                markersize=MARKER_SIZE,
                linestyle="none",
                transform=ident,
            )
        else:
            swatch = Line2D(
                [x, x + hl],
                [yc, yc],
                color=color,
                linestyle=kind,
                linewidth=LINE_WIDTH,
                transform=ident,
            )
        swatch.set_zorder(6)
        text = Text(
            x + hl + _TEXT_PAD * em,
            yc,
            name,
            fontsize=style.font_size,
            va="center",
            ha="left",
            transform=ident,
            zorder=6,
        )
        fig.add_artist(swatch)
        fig.add_artist(text)
        legend.swatches.append(swatch)
        legend.texts.append(text)
        if legend.horizontal:
            x += hl + _TEXT_PAD * em + text_size(name, style.font_size)[0]
            x += _COLUMN_SPACING * em
        else:
            y_top -= row_h + _LABEL_SPACING * em


# ---------------------------------------------------------------- axes


def place_axes(fig, ax, legend: Legend, style: Style, texts: dict) -> tuple[float, ...]:
    """Set the axes position so every label fits (matplotlib's default tick, label and title
    paddings, measured text sizes). Returns the axes box in pixels (x0, y0, x1, y1)."""
    fs = style.font_size
    sl, sb, sr, st = outside_strip(legend, style)
    left, bottom, right = EDGE + sl, EDGE + sb, EDGE + sr
    top = EDGE + st + text_size("title", fs + 2)[1] + 6 * PT + 2
    tick = (3.5 + 3.5) * PT  # tick length + tick label pad
    if texts:  # axes with ticks and axis labels
        label_h = text_size("xaxis_label", fs)[1] + 4 * PT
        y_w = max(text_size(t, fs)[0] for t in texts["y"])
        left += label_h + tick + y_w
        size_index = 0 if texts["x_rotated"] else 1
        x_h = max(text_size(t, fs)[size_index] for t in texts["x"])
        bottom += label_h + tick + x_h
        right += text_size(texts["x"][-1], fs)[0] / 2 if texts["x_numeric"] else 0.0
        top = max(top, EDGE + st + text_size(texts["y"][-1], fs)[1] / 2)
    w, h = style.width, HEIGHT
    ax_w, ax_h = w - left - right, h - bottom - top
    ax.set_position((left / w, bottom / h, ax_w / w, ax_h / h))
    if texts:
        # Fixed axis-label anchors (axes fraction) from the same measurements: spares
        # matplotlib's per-draw search of the tick-label boxes.
        ax.xaxis.set_label_coords(0.5, -(tick + x_h + 4 * PT) / ax_h)
        ax.yaxis.set_label_coords(-(tick + y_w + 4 * PT) / ax_w, 0.5)
    return left, bottom, w - right, h - top
