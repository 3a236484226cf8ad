"""The line grammar of CHART-Info tasks 2, 4, 5 and 6a as text (text.py's task).

`serialize` writes a chart's official task output as lines of text; `parse` turns a model's
output back into the official per-image output (the schema `metrics.chart_info` and
`chartjax-score --task chart_info_task<N>` read). Pure Python. Hand-written: the grammar is
ours (no library or paper defines one).

Coordinates are quantized to a 1000-step grid of the image size: q = round(v * 999 / size),
x over the width, y over the height, clamped to 0..999 (annotation points outside the image
clamp); back: v = q * size / 999 (exact at 0 and at the size; at most size / 1998 px off).
One item per line (separated by "\\n"), in reading order of their top-left point (top to
bottom, then left to right; ties keep the annotation's order):
* task2 (text blocks): `y0 x0 y1 x1 text` (text on one line: wrapped text joined by spaces,
  which the metric's sanitizing does as well).
* task4 (axes): `<axis> <text-block id> y x` with axis x, y, x2, y2 (x-axis, y-axis, x-axis-2,
  y-axis-2) and the tick point.
* task5 (legend): `<text-block id> y0 x0 y1 x1`, the legend patch's box.
* task6a (plot elements): `bar y0 x0 y1 x1`; `box` then y x of min, first_quartile, median,
  third_quartile, max; `line y x y x ...` (one line per series, its points in order);
  `point y x` (scatter).
The ids of tasks 4 and 5 are the text blocks the task's header offers (text.py).

The grammar is strict: a line that is not exactly one item (wrong keyword, a non-integer, a
value over 999, y1 < y0 or x1 < x0, a box without 10 numbers, an odd count of line numbers) is
malformed. Malformed lines are left out of the prediction and counted: `num_malformed_items`
(lines), `num_partially_parsed` (images with good and malformed lines) and `num_unparseable`
(non-empty outputs without one good line: scored as an empty prediction). Empty lines are
skipped; `num_unknown_ids` counts task 4/5 items naming a block not in the header.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from chartjax.tasks.chart_info import tables as chart_info_tables

MODES = ("task2", "task4", "task5", "task6a")
GRID = 1000
AXES = {"x-axis": "x", "y-axis": "y", "x-axis-2": "x2", "y-axis-2": "y2"}
_AXIS_NAMES = {v: k for k, v in AXES.items()}
BOX_ORDER = ("min", "first_quartile", "median", "third_quartile", "max")
ELEMENT_KINDS = ("bars", "boxplots", "lines", "scatter points")
_INT = re.compile(r"\d+")
_TASK2 = re.compile(r"(\d+) (\d+) (\d+) (\d+)(?: (.*))?")


def official_key(mode: str) -> str:
    """The official JSON's key of a mode: task 6a lives in "task6"."""
    return "task6" if mode == "task6a" else mode


def quantize(value: float, size: float) -> int:
    return min(GRID - 1, max(0, math.floor(float(value) * (GRID - 1) / size + 0.5)))


def dequantize(q: int, size: float) -> float:
    return q * size / (GRID - 1)


# ------------------------------------------------------------------ serializers ------------


def _box_corners(bb: Mapping[str, Any]) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) of an official `bb` or `polygon` (its bounding box)."""
    if "x1" in bb:  # polygon corners
        xs = [float(bb[f"x{i}"]) for i in range(4)]
        ys = [float(bb[f"y{i}"]) for i in range(4)]
        return min(xs), min(ys), max(xs), max(ys)
    x0, y0 = float(bb["x0"]), float(bb["y0"])
    return x0, y0, x0 + float(bb["width"]), y0 + float(bb["height"])


def _qbox(bb, size) -> list[int]:
    """[y0, x0, y1, x1] on the grid."""
    w, h = size
    x0, y0, x1, y1 = _box_corners(bb)
    return [quantize(y0, h), quantize(x0, w), quantize(y1, h), quantize(x1, w)]


def _qpoint(pt, size) -> list[int]:
    w, h = size
    return [quantize(pt["y"], h), quantize(pt["x"], w)]


def _lines(items: list[tuple[list[int], str]]) -> str:
    """Items (sort key: the first y, x on the grid) -> the target text, in reading order."""
    return "\n".join(text for _, text in sorted(items, key=lambda it: it[0]))


def _ints(values: Sequence[int]) -> str:
    return " ".join(str(v) for v in values)


def serialize(mode: str, output: Mapping[str, Any] | None, size: tuple[float, float]) -> str:
    """The target text of one chart's official task output (`size` = (width, height))."""
    output = output or {}
    items: list[tuple[list[int], str]] = []
    if mode == "task2":
        for b in output.get("text_blocks") or []:
            box = _qbox(b["polygon"] if "polygon" in b else b["bb"], size)
            text = chart_info_tables.block_text(b.get("text") or "")
            items.append((box, f"{_ints(box)} {text}" if text else _ints(box)))
    elif mode == "task4":
        for axis, ticks in (output.get("axes") or {}).items():
            if axis not in AXES:
                continue  # "_x-tick-type" and the like are not ticks
            for t in ticks or []:
                if t.get("id") is None:
                    continue  # the metric drops id-less ticks too
                pt = _qpoint(t["tick_pt"], size)
                items.append((pt, f"{AXES[axis]} {int(t['id'])} {_ints(pt)}"))
    elif mode == "task5":
        for p in output.get("legend_pairs") or []:
            box = _qbox(p["bb"], size)
            items.append((box, f"{int(p['id'])} {_ints(box)}"))
    elif mode == "task6a":
        ve = output.get("visual elements") or {}
        for b in ve.get("bars") or []:
            box = _qbox(b, size)
            items.append((box, f"bar {_ints(box)}"))
        for i, b in enumerate(ve.get("boxplots") or []):
            missing = [s for s in BOX_ORDER if s not in b]
            if missing:
                raise ValueError(f"task6 visual elements: boxplots[{i}] has no {missing}")
            pts = [v for s in BOX_ORDER for v in _qpoint(b[s], size)]
            items.append((pts, f"box {_ints(pts)}"))
        for line in ve.get("lines") or []:
            pts = [v for p in line for v in _qpoint(p, size)]
            if pts:
                items.append((pts, f"line {_ints(pts)}"))
        scatter = ve.get("scatter points") or []
        for p in (q for group in scatter for q in (group if isinstance(group, list) else [group])):
            pt = _qpoint(p, size)
            items.append((pt, f"point {_ints(pt)}"))
    else:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    return _lines(items)


# ------------------------------------------------------------------ parser -----------------


@dataclasses.dataclass
class Parsed:
    """One output text read back: the official task output, its good and malformed lines."""

    output: dict
    items: int = 0
    malformed: list[str] = dataclasses.field(default_factory=list)
    unknown_ids: int = 0


def _grid_ints(parts: Sequence[str]) -> list[int] | None:
    if not all(_INT.fullmatch(p) for p in parts):
        return None
    values = [int(p) for p in parts]
    return values if all(v < GRID for v in values) else None


def _bb(q: Sequence[int], size) -> dict | None:
    """Grid [y0, x0, y1, x1] -> an official bb; None when the box is inverted."""
    y0, x0, y1, x1 = q
    if y1 < y0 or x1 < x0:
        return None
    w, h = size
    px0, py0 = dequantize(x0, w), dequantize(y0, h)
    return {
        "x0": px0,
        "y0": py0,
        "width": dequantize(x1, w) - px0,
        "height": dequantize(y1, h) - py0,
    }


def _pt(q: Sequence[int], size) -> dict:
    return {"x": dequantize(q[1], size[0]), "y": dequantize(q[0], size[1])}


def _empty(mode: str) -> dict:
    if mode == "task2":
        return {"text_blocks": []}
    if mode == "task4":
        return {"axes": {"x-axis": [], "y-axis": []}}
    if mode == "task5":
        return {"legend_pairs": []}
    return {"visual elements": {k: [] for k in ELEMENT_KINDS}}


def _item(mode: str, line: str, size, n: int) -> tuple[str, Any] | None:
    """(where it goes, the official item) of one line, or None when it is malformed."""
    if mode == "task2":
        m = _TASK2.fullmatch(line)
        q = m and _grid_ints(m.groups()[:4])
        bb = q and _bb(q, size)
        return bb and ("text_blocks", {"id": n, "bb": bb, "text": m.group(5) or ""})
    parts = line.split(" ")
    if mode == "task4":
        axis = _AXIS_NAMES.get(parts[0])
        q = axis and len(parts) == 4 and _INT.fullmatch(parts[1]) and _grid_ints(parts[2:])
        return q and (axis, {"id": int(parts[1]), "tick_pt": _pt(q, size)})
    if mode == "task5":
        q = len(parts) == 5 and _INT.fullmatch(parts[0]) and _grid_ints(parts[1:])
        bb = q and _bb(q, size)
        return bb and ("legend_pairs", {"id": int(parts[0]), "bb": bb})
    kind, q = parts[0], _grid_ints(parts[1:])
    if not q:
        return None
    if kind == "bar" and len(q) == 4:
        bb = _bb(q, size)
        return bb and ("bars", bb)
    if kind == "box" and len(q) == 10:
        return "boxplots", {s: _pt(q[2 * i : 2 * i + 2], size) for i, s in enumerate(BOX_ORDER)}
    if kind == "line" and len(q) % 2 == 0:
        return "lines", [_pt(q[i : i + 2], size) for i in range(0, len(q), 2)]
    if kind == "point" and len(q) == 2:
        return "scatter points", _pt(q, size)
    return None


def parse(mode: str, text: str, size: tuple[float, float], ids: Sequence[int] = ()) -> Parsed:
    """A model output -> the official task output (module docstring: the grammar). `ids`: the
    text-block ids the header offered (tasks 4, 5), for `unknown_ids`."""
    out = Parsed(_empty(mode))
    known = set(ids)
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        got = _item(mode, line, size, out.items)
        if not got:
            out.malformed.append(line)
            continue
        key, item = got
        out.items += 1
        if mode == "task4":
            out.output["axes"].setdefault(key, []).append(item)
        elif mode == "task6a":
            out.output["visual elements"][key].append(item)
        else:
            out.output[key].append(item)
        if mode in ("task4", "task5") and item["id"] not in known:
            out.unknown_ids += 1
    return out


def parse_counts(parsed: Sequence[Parsed], texts: Sequence[str]) -> dict[str, int]:
    return {
        "num_items": sum(p.items for p in parsed),
        "num_malformed_items": sum(len(p.malformed) for p in parsed),
        "num_partially_parsed": sum(bool(p.items and p.malformed) for p in parsed),
        "num_unparseable": sum(not p.items and bool(t.strip()) for p, t in zip(parsed, texts)),
        "num_unknown_ids": sum(p.unknown_ids for p in parsed),
    }
