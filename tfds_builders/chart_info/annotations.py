"""Parsing one CHART-Info annotation file into example features (pure Python + numpy).

One parser for both layouts (docs/corpora.md §3.3-§3.5): text blocks carry `bb` (2019 synthetic) or
`polygon` (PMC); chart types are capitalized (2019) or lower-case (PMC); box-plot series are a
dict (2019) or a list with `x` (PMC); `scatter points` is flat (2019) or per series (PMC). A task
whose entry is missing, `null`, test-mode (no `output`) or has an empty output `{}` (2019 pie and
donut files) is marked absent (`has_task<N>` False) and its features are left empty, never filled.

Boxes are stored as [x0, y0, width, height] (top-left origin, the JSON's own convention) and
polygons as [x0, y0, x1, y1, x2, y2, x3, y3] (corners clockwise from top-left). Coordinates and
box statistics must be finite: NaN or Infinity (which Python's json reads) is an AnnotationError
naming the field, never a value in the dataset.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

NUM_TASKS = 6
BOX_STATS = ("min", "first_quartile", "median", "third_quartile", "max")
_GROUPINGS = ("grouped", "stacked")
_ORIENTATIONS = ("vertical", "horizontal")


class AnnotationError(ValueError):
    """A malformed annotation; the message says which task and field."""


def normalize_chart_type(raw: str) -> str:
    """'Grouped vertical bar', 'Horizontal Grouped Bar', 'vertical bar', 'scatter-line' -> snake
    case in one word order: [grouping] [orientation] type (grouped_vertical_bar, scatter_line)."""
    words = re.split(r"[\s_\-]+", raw.strip().lower())
    words = [w for w in words if w]
    grouping = [w for w in words if w in _GROUPINGS]
    orientation = [w for w in words if w in _ORIENTATIONS]
    rest = [w for w in words if w not in _GROUPINGS and w not in _ORIENTATIONS]
    return "_".join(grouping + orientation + rest)


def normalize_role(raw: str) -> str:
    return raw.strip().lower().replace("-", "_")


def _task_output(doc: dict[str, Any], k: int) -> dict[str, Any] | None:
    task = doc.get(f"task{k}")
    if task is None:
        return None
    if not isinstance(task, dict):
        raise AnnotationError(f"task{k} is {type(task).__name__}, expected an object or null")
    output = task.get("output")
    if output is None or output == {}:
        return None
    if not isinstance(output, dict):
        raise AnnotationError(f"task{k}.output is {type(output).__name__}, expected an object")
    return output


def _num(value: Any, where: str) -> float:
    """A coordinate or statistic: a finite number (json reads NaN/Infinity, float() 'nan')."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise AnnotationError(f"{where}: {value!r:.60} is not a number")
    try:
        number = float(value)
    except ValueError as e:
        raise AnnotationError(f"{where}: {value!r:.60} is not a number") from e
    if not math.isfinite(number):
        raise AnnotationError(f"{where}: {value!r:.60} is not a finite number")
    return number


def _box(bb: Any, where: str) -> list[float]:
    if not isinstance(bb, dict):
        raise AnnotationError(f"{where}: box {bb!r:.60} is not an object")
    return [_num(bb.get(k), f"{where}.{k}") for k in ("x0", "y0", "width", "height")]


def _point(pt: Any, where: str) -> list[float]:
    if not isinstance(pt, dict):
        raise AnnotationError(f"{where}: point {pt!r:.60} is not an object")
    return [_num(pt.get("x"), f"{where}.x"), _num(pt.get("y"), f"{where}.y")]


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AnnotationError(f"{where} is {type(value).__name__}, expected a list")
    return value


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _as_float(value: Any, where: str) -> float:
    """A data value as float; NaN when it is not a number (e.g. a PMC value-label string).

    A JSON number that is NaN or infinite (json reads the non-standard literals) is an error:
    NaN would pass for a label string. A string such as 'inf' is text, kept in `y_text`.
    """
    if isinstance(value, bool):
        return math.nan
    if isinstance(value, float) and not math.isfinite(value):
        raise AnnotationError(f"{where}: {value!r} is not a finite number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def _text_blocks(output: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = []
    for i, block in enumerate(_list(output.get("text_blocks"), "task2.text_blocks")):
        where = f"task2.text_blocks[{i}]"
        if not isinstance(block, dict) or not isinstance(block.get("id"), int):
            raise AnnotationError(f"{where}: needs an integer id")
        if "polygon" in block:
            p = block["polygon"]
            if not isinstance(p, dict):
                raise AnnotationError(f"{where}.polygon is not an object")
            poly = [
                _num(p.get(f"{a}{j}"), f"{where}.polygon.{a}{j}") for j in range(4) for a in "xy"
            ]
            xs, ys = poly[0::2], poly[1::2]
            # PMC quads may be rotated or have inverted corners: the box is their hull.
            bbox = [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
        elif "bb" in block:
            bbox = _box(block["bb"], f"{where}.bb")
            x0, y0, w, h = bbox
            poly = [x0, y0, x0 + w, y0, x0 + w, y0 + h, x0, y0 + h]
        else:
            raise AnnotationError(f"{where}: has neither bb nor polygon")
        text = block.get("text")
        blocks.append(
            {
                "id": block["id"],
                "text": "" if text is None else str(text),
                "polygon": poly,
                "bbox": bbox,
            }
        )
    return blocks


def _text_roles(output: dict[str, Any]) -> list[dict[str, Any]]:
    roles = []
    for i, item in enumerate(_list(output.get("text_roles"), "task3.text_roles")):
        if not isinstance(item, dict) or not isinstance(item.get("id"), int):
            raise AnnotationError(f"task3.text_roles[{i}]: needs an integer id")
        roles.append({"id": item["id"], "role": normalize_role(str(item.get("role", "")))})
    return roles


def _axes(output: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    axes = output.get("axes") or {}
    if not isinstance(axes, dict):
        raise AnnotationError("task4.axes is not an object")
    ticks, tick_types = [], []
    for name, value in axes.items():
        if name.startswith("_"):  # PMC `_x-tick-type`, ...: markers / separators / null
            if value is not None:
                tick_types.append({"axis": name.lstrip("_"), "type": str(value)})
            continue
        for i, tick in enumerate(_list(value, f"task4.axes[{name!r}]")):
            where = f"task4.axes[{name!r}][{i}]"
            if not isinstance(tick, dict) or not isinstance(tick.get("id"), int):
                raise AnnotationError(f"{where}: needs an integer id")
            ticks.append(
                {
                    "axis": name,
                    "id": tick["id"],
                    "tick_pt": _point(tick.get("tick_pt"), f"{where}.tick_pt"),
                }
            )
    return ticks, tick_types


def _legend_pairs(output: dict[str, Any]) -> list[dict[str, Any]]:
    pairs = []
    for i, pair in enumerate(_list(output.get("legend_pairs"), "task5.legend_pairs")):
        where = f"task5.legend_pairs[{i}]"
        if not isinstance(pair, dict) or not isinstance(pair.get("id"), int):
            raise AnnotationError(f"{where}: needs an integer id")
        pairs.append({"id": pair["id"], "bb": _box(pair.get("bb"), f"{where}.bb")})
    return pairs


def _data_series(output: dict[str, Any]) -> tuple[list[str], list[dict], list[dict]]:
    names, points, boxes = [], [], []
    for s, series in enumerate(_list(output.get("data series"), "task6['data series']")):
        where = f"task6['data series'][{s}]"
        if not isinstance(series, dict):
            raise AnnotationError(f"{where} is not an object")
        names.append(str(series.get("name", "")))
        data = series.get("data")
        # 2019 box plots: one series per box, `data` a dict of the five statistics.
        items = [data] if isinstance(data, dict) else _list(data, f"{where}.data")
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise AnnotationError(f"{where}.data[{i}] is not an object")
            if all(k in item for k in BOX_STATS):
                x = _as_text(item["x"]) if "x" in item else ""
                stats = {k: _num(item[k], f"{where}.data[{i}].{k}") for k in BOX_STATS}
                boxes.append({"series": s, "x": x, **stats})
            elif "x" in item and "y" in item:
                points.append(
                    {
                        "series": s,
                        "x": _as_text(item["x"]),
                        "y": _as_float(item["y"], f"{where}.data[{i}].y"),
                        "y_text": _as_text(item["y"]),
                    }
                )
            # Any other point shape is left unparsed; data_series_json still holds it.
    return names, points, boxes


def _visual_elements(output: dict[str, Any]) -> dict[str, list]:
    elements = output.get("visual elements") or {}
    if not isinstance(elements, dict):
        raise AnnotationError("task6['visual elements'] is not an object")
    bars = [_box(b, f"bars[{i}]") for i, b in enumerate(_list(elements.get("bars"), "bars"))]
    lines = []
    for j, line in enumerate(_list(elements.get("lines"), "lines")):
        for i, pt in enumerate(_list(line, f"lines[{j}]")):
            x, y = _point(pt, f"lines[{j}][{i}]")
            lines.append({"line": j, "x": x, "y": y})
    scatter = []
    for j, item in enumerate(_list(elements.get("scatter points"), "scatter points")):
        group, series = (item, j) if isinstance(item, list) else ([item], -1)  # -1: 2019 flat
        for i, pt in enumerate(group):
            x, y = _point(pt, f"scatter points[{j}][{i}]")
            scatter.append({"series": series, "x": x, "y": y})
    boxplots = []
    for j, box in enumerate(_list(elements.get("boxplots"), "boxplots")):
        if not isinstance(box, dict):
            raise AnnotationError(f"boxplots[{j}] is not an object")
        for stat, value in sorted(box.items()):
            where = f"boxplots[{j}].{stat}"
            x, y = _point(value, where)
            boxplots.append(
                {
                    "box": j,
                    "stat": stat,
                    "x": x,
                    "y": y,
                    "bb": _box(value.get("_bb"), f"{where}._bb"),
                }
            )
    return {"bars": bars, "lines": lines, "scatter_points": scatter, "boxplots": boxplots}


def parse(doc: Any) -> dict[str, Any]:
    """Features of one annotation document (everything but id and image)."""
    if not isinstance(doc, dict):
        raise AnnotationError(f"top level is {type(doc).__name__}, expected an object")
    outputs = {k: _task_output(doc, k) for k in range(1, NUM_TASKS + 1)}
    o1, o2, o3, o4, o5, o6 = (outputs[k] or {} for k in range(1, NUM_TASKS + 1))
    raw_type = o1.get("chart_type")
    if outputs[1] is not None and not isinstance(raw_type, str):
        raise AnnotationError(f"task1.output.chart_type is {raw_type!r:.60}")
    raw_type = raw_type or ""
    ticks, tick_types = _axes(o4)
    names, points, boxes = _data_series(o6)
    visual = _visual_elements(o6)
    plot_bb = o4.get("_plot_bb")
    return {
        **{f"has_task{k}": outputs[k] is not None for k in range(1, NUM_TASKS + 1)},
        "chart_type": normalize_chart_type(raw_type),
        "chart_type_raw": raw_type,
        "text_blocks": _text_blocks(o2),
        "text_roles": _text_roles(o3),
        "has_plot_bb": plot_bb is not None,
        "plot_bb": np.asarray(
            _box(plot_bb, "task4._plot_bb") if plot_bb is not None else [0.0] * 4,
            dtype=np.float32,
        ),
        "axis_ticks": ticks,
        "axis_tick_types": tick_types,
        "legend_pairs": _legend_pairs(o5),
        "data_series_json": json.dumps(o6["data series"]) if "data series" in o6 else "",
        "visual_elements_json": (
            json.dumps(o6["visual elements"]) if "visual elements" in o6 else ""
        ),
        "series_names": names,
        "data_points": points,
        "box_stats": boxes,
        "bars": visual["bars"],
        "lines": visual["lines"],
        "scatter_points": visual["scatter_points"],
        "boxplots": visual["boxplots"],
    }
