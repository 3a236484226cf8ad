"""Axis decoration and layout: tick marks, tick labels, axis titles, grid lines.

Matplotlib's Axis/Tick machinery costs more than the rest of a chart (five artists per tick and
a tight-bbox pass per draw), so it is switched off: each axis is one marker line (the tick
marks, as Matplotlib's ticks draw them) plus one Text per label, placed with the blended
transforms Matplotlib's ticks use. Their window extents are known before any draw, so the
layout is solved by measuring and the chart is rasterized once.
"""

from __future__ import annotations

import dataclasses

from matplotlib import lines as mlines
from matplotlib.collections import LineCollection
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.transforms import blended_transform_factory, offset_copy

from chartjax.synth.chart_info_style import font

DPI = 100
EDGE_PAD = 8.0  # px kept free at the image border
TITLE_GAP = 10.0  # px between the chart title and what lies below it
MAX_PASSES = 6


class LayoutError(RuntimeError):
    """The chart could not be laid out inside the image (the caller draws another style)."""


@dataclasses.dataclass
class AxisTicks:
    key: str  # "x-axis" (independent variable) or "y-axis", as in the 2019 JSON
    side: str  # bottom / left / right
    locs: tuple[float, ...]  # data coordinates along the axis
    labels: list[Text]
    title: Text | None = None


def _base(ax, side: str):
    if side == "bottom":
        return blended_transform_factory(ax.transData, ax.transAxes)
    return blended_transform_factory(ax.transAxes, ax.transData)


def extent(d, text: Text):
    """Window extent of `text`, measured once per chart.

    A text's laid-out box only moves with its anchor while font, rotation and alignment stay
    (which is how `Text.get_window_extent` composes it), so later calls translate the first
    measurement instead of laying the text out again: layout is the costly part of measuring.
    """
    anchor = text.get_transform().transform(text.get_unitless_position())
    hit = d.extents.get(id(text))
    if hit is None:
        box = text.get_window_extent(d.canvas.get_renderer())
        d.extents[id(text)] = (box, anchor)
        return box
    box, first = hit
    return box.translated(anchor[0] - first[0], anchor[1] - first[1])


def _offset_px(style) -> float:
    return (style.tick_length + 3.5) * DPI / 72  # tick length + Matplotlib's 3.5 pt label pad


def set_rotation(labels: list[Text], rotation: int) -> None:
    """Bottom-axis labels: slanted ones end at their tick (anchor mode), 90° ones hang below."""
    for t in labels:
        t.set_rotation(rotation)
        if rotation in (0, 90):
            t.set_rotation_mode("default")
            t.set_horizontalalignment("center")
        else:
            t.set_rotation_mode("anchor")
            t.set_horizontalalignment("right")
        t.set_verticalalignment("top")


def add_axis(d, key: str, side: str, locs, texts, grid: bool) -> AxisTicks:
    """Tick marks, labels and (optionally) grid lines for one axis of `d.ax`."""
    s, ax, fig = d.style, d.ax, d.fig
    base = _base(ax, side)
    off = _offset_px(s)
    prop = font(s, s.tick_size)
    if side == "bottom":
        tr, pts = offset_copy(base, fig, y=-off, units="dots"), [(v, 0.0) for v in locs]
        align = {"ha": "center", "va": "top"}
        marker, mpts = mlines.TICKDOWN, ([v for v in locs], [0.0] * len(locs))
    else:
        x = 0.0 if side == "left" else 1.0
        tr = offset_copy(base, fig, x=-off if side == "left" else off, units="dots")
        pts = [(x, v) for v in locs]
        align = {
            "ha": "right" if side == "left" else "left",
            "va": "center",
            "multialignment": "right" if side == "left" else "left",
        }
        marker = mlines.TICKLEFT if side == "left" else mlines.TICKRIGHT
        mpts = ([x] * len(locs), [v for v in locs])
    labels = []
    for (x, y), text in zip(pts, texts):
        t = Text(x, y, text, transform=tr, fontproperties=prop, color=s.text_color, **align)
        t.set_clip_on(False)
        ax.add_artist(t)
        labels.append(t)
    if s.tick_length > 0:
        marks = Line2D(
            *mpts,
            transform=base,
            linestyle="none",
            marker=marker,
            markersize=s.tick_length,
            markeredgewidth=max(s.spine_width * 0.8, 0.5),
            color=s.tick_color,
            clip_on=False,
        )
        ax.add_artist(marks)
    if grid:
        segs = [[(v, 0.0), (v, 1.0)] if side == "bottom" else [(0.0, v), (1.0, v)] for v in locs]
        ax.add_collection(
            LineCollection(
                segs,
                transform=base,
                colors=[s.grid_color],
                linestyles=s.grid_style,
                linewidths=0.8,
                zorder=0.5,
            ),
            autolim=False,
        )
    return AxisTicks(key, side, tuple(float(v) for v in locs), labels)


def add_axis_title(d, axis: AxisTicks, text: str) -> None:
    s = d.style
    prop = font(s, s.label_size)
    if axis.side == "bottom":
        t = Text(0.5, 0.0, text, ha="center", va="top", fontproperties=prop, color=s.text_color)
    else:
        x = 0.0 if axis.side == "left" else 1.0
        t = Text(
            x,
            0.5,
            text,
            rotation=90,
            va="center",
            ha="right" if x == 0 else "left",
            fontproperties=prop,
            color=s.text_color,
        )
    t.set_clip_on(False)
    d.ax.add_artist(t)
    axis.title = t


def _place_title(d, axis: AxisTicks) -> None:
    """Puts the axis title just outside its tick labels (their extents are measured)."""
    boxes = [extent(d, t) for t in axis.labels]
    if axis.side == "bottom":
        depth = max((b.height for b in boxes), default=0.0)
    else:
        depth = max((b.width for b in boxes), default=0.0)
    off = _offset_px(d.style) + depth + 4 * DPI / 72
    sign = -1.0 if axis.side in ("bottom", "left") else 1.0
    kw = {"y": sign * off} if axis.side == "bottom" else {"x": sign * off}
    axis.title.set_transform(offset_copy(d.ax.transAxes, d.fig, units="dots", **kw))


def visible_texts(d, legend: bool = True) -> list[Text]:
    """Every non-empty text of the chart: title, axes, pie labels, legend (whose texts are only
    placed by a draw; before one, measure the legend box instead)."""
    texts = [d.title] if d.title is not None else []
    texts += [t for t in d.ax.texts]
    if legend and d.legend is not None:
        texts += d.legend.get_texts()
    return [t for t in texts if t.get_visible() and t.get_text()]


def _overlap(boxes) -> bool:
    return any(
        a.x1 > b.x0 and b.x1 > a.x0 and a.y1 > b.y0 and b.y1 > a.y0
        for a, b in zip(boxes, boxes[1:])
    )


def _apply(d, m: list[float], square: bool) -> None:
    W, H = d.style.width, d.style.height
    w, h = W - m[0] - m[2], H - m[1] - m[3]
    if w < 0.35 * W or h < 0.35 * H:
        raise LayoutError(f"plot area too small: {w:.0f} x {h:.0f} px")
    if square:  # pies: a square plot area centred in the free space
        side = min(w, h)
        m = [m[0] + (w - side) / 2, m[1] + (h - side) / 2]
        w = h = side
    d.ax.set_position((m[0] / W, m[1] / H, w / W, h / H))
    if d.title is not None:
        loc = d.style.title_loc
        x = {"left": m[0], "center": m[0] + w / 2, "right": m[0] + w}[loc] / W
        d.title.set_position((x, 1.0 - EDGE_PAD / H))


def layout(d, square: bool = False) -> None:
    """Sets the axes position so every text and the legend fit, the title clears the plot and
    category labels do not overlap (slanted labels turn upright first). No drawing."""
    r = d.canvas.get_renderer()
    for axis in d.axes:
        if axis.title is not None:
            _place_title(d, axis)
    title_h = extent(d, d.title).height if d.title is not None else 0.0
    # First pass: margins = measured overhang of the decorations beyond the axes box.
    d.ax.set_position((0.2, 0.2, 0.6, 0.6))
    box = d.ax.get_window_extent(r)
    others = [extent(d, t) for t in visible_texts(d, False) if t is not d.title]
    if d.legend is not None:
        others.append(d.legend.get_window_extent(r))
    over = [
        max([box.x0 - b.x0 for b in others] + [0.0]),
        max([box.y0 - b.y0 for b in others] + [0.0]),
        max([b.x1 - box.x1 for b in others] + [0.0]),
        max([b.y1 - box.y1 for b in others] + [0.0]),
    ]
    top_extra = title_h + TITLE_GAP if d.title is not None else 0.0
    margins = [
        EDGE_PAD + 2 + over[0],
        EDGE_PAD + 2 + over[1],
        EDGE_PAD + 2 + over[2],
        EDGE_PAD + 2 + over[3] + top_extra,
    ]
    for _ in range(MAX_PASSES):
        _apply(d, margins, square)
        need, overlap = _problems(d)
        if overlap:
            bottom = [a for a in d.axes if a.side == "bottom" and a.key == "x-axis"]
            if not bottom or d.style.cat_rotation == 90:
                raise LayoutError("tick labels overlap")
            d.style = dataclasses.replace(d.style, cat_rotation=90)
            set_rotation(bottom[0].labels, 90)
            for t in bottom[0].labels:  # their boxes change shape: measure again
                d.extents.pop(id(t), None)
            if bottom[0].title is not None:
                _place_title(d, bottom[0])
            continue
        if max(need) <= 0:
            return
        margins = [m + max(n, 0.0) + (2.0 if n > 0 else 0.0) for m, n in zip(margins, need)]
    raise LayoutError("layout did not converge")


def _problems(d) -> tuple[list[float], bool]:
    """Extra margin needed per side (left, bottom, right, top), and tick-label overlap."""
    r = d.canvas.get_renderer()
    W, H = d.style.width, d.style.height
    texts = visible_texts(d, False)
    boxes = [extent(d, t) for t in texts]
    box_of = {id(t): b for t, b in zip(texts, boxes)}
    if d.legend is not None:
        legend = d.legend.get_window_extent(r)
        if any(_overlap([legend, b]) for b in boxes):
            raise LayoutError("the legend covers a text")
        boxes.append(legend)
    need = [0.0, 0.0, 0.0, 0.0]
    for b in boxes:
        need = [
            max(need[0], EDGE_PAD - b.x0),
            max(need[1], EDGE_PAD - b.y0),
            max(need[2], b.x1 - (W - EDGE_PAD)),
            max(need[3], b.y1 - (H - EDGE_PAD)),
        ]
    if d.title is not None:  # the title must clear the plot area, tick labels and legend
        tbox = extent(d, d.title)
        for b in [d.ax.get_window_extent(r)] + boxes[1:]:
            if b.x1 > tbox.x0 and b.x0 < tbox.x1 and b.y1 > tbox.y0 - TITLE_GAP / 2:
                need[3] = max(need[3], b.y1 - tbox.y0 + TITLE_GAP)
    overlap = any(_overlap([box_of[id(t)] for t in a.labels if id(t) in box_of]) for a in d.axes)
    return need, overlap
