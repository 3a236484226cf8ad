"""Reads the 2019 task 2-6 annotations off a drawn chart (Matplotlib's own geometry).

Text boxes are renderer window extents, tick points and plot elements go through the axes'
data transform; display coordinates (y up, origin bottom-left) become image pixels (y down).
Boxes are rounded outward so they contain every pixel the element touches; points are the
index of the pixel that holds them.
"""

from __future__ import annotations

import math

from chartjax.synth import chart_info_tables as tb
from chartjax.synth.chart_info_axes import extent
from chartjax.synth.chart_info_render import Drawn


def _bb(x0: float, y0: float, x1: float, y1: float, height: int) -> dict:
    """Display-space box -> the official {"height","width","x0","y0"} in image pixels."""
    left, right = math.floor(min(x0, x1)), math.ceil(max(x0, x1))
    top, bottom = math.floor(height - max(y0, y1)), math.ceil(height - min(y0, y1))
    return {"height": bottom - top, "width": right - left, "x0": left, "y0": top}


def _pt(x: float, y: float, height: int) -> dict:
    return {"x": math.floor(x), "y": math.floor(height - y)}


def _segment(p0, p1, height: int) -> dict:
    """A box-plot stroke: `_bb` of the segment (one side 0 wide, as in the 2019 files) + centre."""
    (ax_, ay), (bx, by) = p0, p1
    ay, by = height - ay, height - by
    x0, y0 = round(min(ax_, bx)), round(min(ay, by))
    bb = {"height": round(max(ay, by)) - y0, "width": round(max(ax_, bx)) - x0, "x0": x0, "y0": y0}
    return {"_bb": bb, "x": math.floor((ax_ + bx) / 2), "y": math.floor((ay + by) / 2)}


def _tick_point(d: Drawn, side: str, loc: float) -> tuple[float, float]:
    """Where the tick meets its axis line (the plot-box edge), in display coordinates."""
    box = d.ax.get_window_extent(d.canvas.get_renderer())
    if side == "bottom":
        return d.ax.transData.transform((loc, 0.0))[0], box.y0
    y = d.ax.transData.transform((0.0, loc))[1]
    return (box.x0 if side == "left" else box.x1), y


def annotate(d: Drawn) -> dict | None:
    """The outputs of tasks 2-6 keyed as in the official JSON; None for pie/donut (no tasks)."""
    data, ax, H = d.data, d.ax, d.style.height
    if data.chart_type in (tb.PIE, tb.DONUT):
        return None
    r = d.canvas.get_renderer()
    blocks: list[tuple[object, str]] = []

    def add(text, role: str) -> int | None:
        if text is None or not text.get_visible() or not text.get_text():
            return None
        blocks.append((text, role))
        return len(blocks) - 1

    add(d.title, "chart_title")
    for axis in d.axes:  # independent ("x-axis") first, as in the 2019 files
        add(axis.title, "axis_title")
    axes = {}
    for axis in d.axes:
        axes[axis.key] = [
            {"id": add(label, "tick_label"), "tick_pt": _pt(*_tick_point(d, axis.side, loc), H)}
            for label, loc in zip(axis.labels, axis.locs)
            if label.get_text()
        ]
    legend_pairs = []
    if d.legend is not None:
        for text, handle in zip(d.legend.get_texts(), d.legend.legend_handles):
            e = handle.get_window_extent(r)
            legend_pairs.append(
                {"bb": _bb(e.x0, e.y0, e.x1, e.y1, H), "id": add(text, "legend_label")}
            )
    for text in d.value_labels:  # --value-labels only; the role name is PMC 2020's
        add(text, "value_label")
    text_blocks = []
    for i, (text, _) in enumerate(blocks):
        e = extent(d, text)
        text_blocks.append({"bb": _bb(e.x0, e.y0, e.x1, e.y1, H), "id": i, "text": text.get_text()})
    plot = ax.get_window_extent(r)
    return {
        "text_blocks": text_blocks,
        "text_roles": [{"id": i, "role": role} for i, (_, role) in enumerate(blocks)],
        "_plot_bb": _bb(plot.x0, plot.y0, plot.x1, plot.y1, H),
        "axes": axes,
        "legend_pairs": legend_pairs,
        "data series": data_series(data),
        "visual elements": _visual_elements(d),
    }


def data_series(data: tb.ChartData) -> list[dict]:
    """Task 6 "data series" with the 2019 value types (strings for bars/lines, float scatter y,
    a dict of five floats per box)."""
    if data.chart_type in tb.BOX_TYPES:
        return [
            {"data": {k: float(v) for k, v in zip(tb.BOX_STATS, row)}, "name": cat}
            for cat, row in zip(data.categories, data.cells)
        ]
    if data.chart_type == tb.SCATTER:
        return [
            {
                "data": [
                    {"x": x, "y": float(row[0])} for x, row in zip(data.categories, data.cells)
                ],
                "name": "",
            }
        ]
    return [
        {
            "data": [{"x": cat, "y": row[k]} for cat, row in zip(data.categories, data.cells)],
            "name": name,
        }
        for k, name in enumerate(data.series)
    ]


def _visual_elements(d: Drawn) -> dict:
    H = d.style.height
    to_px = d.ax.transData.transform

    def disp(pos: float, value: float):
        return to_px((value, pos) if d.horizontal else (pos, value))

    bars = []
    for _, _, c0, c1, v0, v1 in d.bars:
        (xa, ya), (xb, yb) = disp(c0, v0), disp(c1, v1)
        bars.append(_bb(xa, ya, xb, yb, H))
    lines = [[_pt(*disp(p, v), H) for p, v in series] for series in d.lines]
    points = [_pt(*to_px((x, y)), H) for x, y in d.points]
    boxplots = []
    for pos, width, cap, stats in d.boxes:
        entry = {}
        for name, value in stats.items():
            half = (cap if name in ("min", "max") else width) / 2
            entry[name] = _segment(disp(pos - half, value), disp(pos + half, value), H)
        boxplots.append(entry)
    return {"bars": bars, "boxplots": boxplots, "lines": lines, "scatter points": points}
