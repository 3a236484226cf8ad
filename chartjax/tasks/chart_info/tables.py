"""CHART-Info annotations -> DePlot-style tables and records (used by the deplot and
chart_info tasks).

Table derivation from CHART-Info data series (hand-written; no library knows this format). For
the generator's charts it gives exactly `tables/<stem>.txt` whenever the title and axis titles
are drawn (tests/tasks/test_deplot.py checks this); a hidden title gives "TITLE | " (as
DePlot's own `_to_markdown` writes empty titles) and a hidden axis title an empty header cell.
* header: the independent ("x-axis") axis title, then one column per series (its name); box
  plots: Min | Q1 | Median | Q3 | Max; a single-series scatter: the value-axis title.
* rows: bars/lines: one per x value in first-seen order (series sharing x values share a row;
  a series without a value at that x leaves the cell empty); scatter: one per point; box plots:
  one per box, labelled by its `x` (PMC) or its series name (2019).
* cells: strings as annotated; numbers (2019 scatter y and box statistics are JSON floats)
  with the fewest decimals that write every number of that column group exactly, so "12.50"
  written as 12.5 comes back as "12.50" when another value needs two decimals.
* axis titles: an axis_title block belongs to the axis whose tick labels (task 4 ids) lie
  nearest to it (centre distances); without ticks, the first block is the x-axis title.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from chartjax.data import tables

BOX_STATS = ("min", "first_quartile", "median", "third_quartile", "max")
BOX_HEADER = ("Min", "Q1", "Median", "Q3", "Max")
MAX_DECIMALS = 12
# The CHART-Info features the derivation reads (dotted keys: nested sequence fields).
CHART_INFO_KEYS = (
    "id",
    "chart_type",
    "chart_type_raw",
    "has_task6",
    "data_series_json",
    "text_blocks.id",
    "text_blocks.text",
    "text_blocks.bbox",
    "text_roles.id",
    "text_roles.role",
    "axis_ticks.axis",
    "axis_ticks.id",
)


# ------------------------------------------------------------------ CHART-Info -> table ----


def block_text(text: str) -> str:
    """A text block's text on one line (wrapped titles are joined with spaces)."""
    return " ".join(part.strip() for part in str(text).split("\n") if part.strip())


def chart_view(example: dict) -> dict:
    """Dotted-key TFDS columns -> {"text_blocks": [...], "text_roles": [...],
    "axis_ticks": [...]} in the builder's parse() shape (lists of dicts)."""
    blocks = [
        {"id": int(i), "text": t, "bbox": [float(v) for v in b]}
        for i, t, b in zip(
            example["text_blocks.id"], example["text_blocks.text"], example["text_blocks.bbox"]
        )
    ]
    roles = [
        {"id": int(i), "role": r}
        for i, r in zip(example["text_roles.id"], example["text_roles.role"])
    ]
    ticks = [
        {"axis": a, "id": int(i)}
        for a, i in zip(example["axis_ticks.axis"], example["axis_ticks.id"])
    ]
    return {"text_blocks": blocks, "text_roles": roles, "axis_ticks": ticks}


def _center(bbox: Sequence[float]) -> tuple[float, float]:
    x0, y0, w, h = bbox
    return x0 + w / 2, y0 + h / 2


def titles(
    text_blocks: list[dict], text_roles: list[dict], axis_ticks: list[dict]
) -> tuple[str, str, str]:
    """(chart title, x-axis title, y-axis title) from the text blocks and their roles."""
    role = {r["id"]: r["role"] for r in text_roles}
    by_id = {b["id"]: b for b in text_blocks}
    title = " ".join(
        block_text(b["text"]) for b in text_blocks if role.get(b["id"]) == "chart_title"
    )
    axis_blocks = [b for b in text_blocks if role.get(b["id"]) == "axis_title"]
    centers = {
        name: [
            _center(by_id[t["id"]]["bbox"])
            for t in axis_ticks
            if t["axis"] == name and t["id"] in by_id
        ]
        for name in ("x-axis", "y-axis")
    }

    def distance(block, name):
        cx, cy = _center(block["bbox"])
        return min((math.hypot(cx - x, cy - y) for x, y in centers[name]), default=math.inf)

    sides: dict[str, list[dict]] = {"x": [], "y": []}
    for b in axis_blocks:
        dx, dy = distance(b, "x-axis"), distance(b, "y-axis")
        if dx == dy == math.inf:
            continue
        sides["x" if dx <= dy else "y"].append(b)
    if not sides["x"] and not sides["y"]:  # no ticks to go by: independent axis first
        sides = {"x": axis_blocks[:1], "y": axis_blocks[1:2]}
    x_title, y_title = (" ".join(block_text(b["text"]) for b in sides[s]) for s in "xy")
    return title, x_title, y_title


def _decimals(value: float) -> int:
    for k in range(MAX_DECIMALS + 1):
        if float(f"{value:.{k}f}") == value:
            return k
    return MAX_DECIMALS


class _Numbers:
    """Formats the JSON numbers of one column group with one, exact, number of decimals."""

    def __init__(self, values: list[Any]):
        nums = [v for v in values if _is_number(v)]
        self.k = max((_decimals(float(v)) for v in nums), default=0)

    def __call__(self, value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, str):
            return value.strip()
        if not _is_number(value):
            return json.dumps(value)
        text = f"{float(value):.{self.k}f}"
        return text[1:] if text.startswith("-") and float(text) == 0 else text  # no "-0.0"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _box_rows(series: list[dict]) -> list[tuple[str, dict]]:
    rows = []
    for s in series:
        data = s.get("data")
        for item in [data] if isinstance(data, dict) else (data or []):
            if isinstance(item, dict) and all(k in item for k in BOX_STATS):
                label = item.get("x")
                label = s.get("name", "") if label is None or label == "" else label
                rows.append((label if isinstance(label, str) else json.dumps(label), item))
    return rows


def _points(s: dict) -> list[dict]:
    data = s.get("data")
    return [p for p in (data if isinstance(data, list) else []) if isinstance(p, dict)]


def series_table(
    chart_type: str, series: list[dict], x_title: str, y_title: str
) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """(header, rows) of a chart's task-6 data series (module docstring: the rules)."""
    if "box" in chart_type:
        boxes = _box_rows(series)
        fmt = _Numbers([item[k] for _, item in boxes for k in BOX_STATS])
        return (x_title, *BOX_HEADER), [
            (label, *(fmt(item[k]) for k in BOX_STATS)) for label, item in boxes
        ]
    names = [str(s.get("name", "")) for s in series]
    pts = [_points(s) for s in series]
    fx = _Numbers([p.get("x") for ps in pts for p in ps])
    fy = _Numbers([p.get("y") for ps in pts for p in ps])
    scatter = chart_type == "scatter"
    header = (x_title, y_title) if scatter and len(series) == 1 else (x_title, *names)
    rows: dict[tuple, list[str]] = {}
    for j, ps in enumerate(pts):
        seen: dict[str, int] = {}
        for n, p in enumerate(ps):
            x = fx(p.get("x"))
            seen[x] = seen.get(x, -1) + 1
            key = (j, n) if scatter else (x, seen[x])  # scatter: one row per point
            rows.setdefault(key, [x] + [""] * len(series))[j + 1] = fy(p.get("y"))
    return header, [tuple(r) for r in rows.values()]


def chart_table(
    chart_type: str,
    data_series: list[dict] | None,
    text_blocks: list[dict],
    text_roles: list[dict],
    axis_ticks: list[dict],
) -> str | None:
    """The linearized table of one CHART-Info chart; None when it has no data series."""
    if not data_series:
        return None
    title, x_title, y_title = titles(text_blocks, text_roles, axis_ticks)
    header, rows = series_table(chart_type, data_series, x_title, y_title)
    return tables.linearize(header, rows, title=title)


def chart_info_record(example: dict, prompt: str = tables.DEPLOT_PROMPT) -> dict | None:
    """One record per chart whose task 6 holds data series; None otherwise."""
    text = example["data_series_json"]
    series = json.loads(text) if example["has_task6"] and text else None
    table = chart_table(example["chart_type"], series, **chart_view(example))
    if table is None:
        return None
    return {
        "id": example["id"],
        "prompt": prompt,
        "target": table,
        "meta": {
            "chart_type": example["chart_type"],
            "chart_type_raw": example["chart_type_raw"],
            "data_series": series,
        },
    }


def count_unannotated(builder_dir: str, split: str, task: int) -> int:
    """Charts of `split` whose file does not annotate task `task` (or, for 6, has no series)."""
    from chartjax.data import tfds_records

    count = 0
    for ex in tfds_records.split_examples(builder_dir, split):
        missing = not ex[f"has_task{task}"] or (
            task == 6 and ex["data_series_json"] in (b"", b"[]")
        )
        count += bool(missing)
    return count


# ------------------------------------------------------------------ scoring -------------


def table_scores(texts: list[str], records: list[dict]):
    """RMS + RNSS overall and per chart type; per-record values for predictions.jsonl."""
    from chartjax.metrics import tables as table_metrics

    targets = [r["target"] for r in records]
    scores = table_metrics.rms(texts, targets).update(table_metrics.rnss(texts, targets))
    per = [
        (table_metrics.rms_example([t], p)[2], table_metrics.rnss_example([t], p))
        for p, t in zip(texts, targets)
    ]
    groups: dict[str, list[tuple[float, float]]] = {}
    for (f1, rn), rec in zip(per, records):
        groups.setdefault(rec["meta"].get("chart_type", "unknown"), []).append((f1, rn))
    scores.breakdowns["chart_type"] = {
        g: {
            "rms_f1": sum(v[0] for v in vals) / len(vals),
            "rnss": sum(v[1] for v in vals) / len(vals),
            "n": len(vals),
        }
        for g, vals in sorted(groups.items())
    }
    extra = [{"rms_f1": f1, "rnss": rn} for f1, rn in per]
    return scores, extra
