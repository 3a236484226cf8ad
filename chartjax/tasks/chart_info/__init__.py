"""ICDAR 2019 CHART-Infographics / CHART-Info 2020+ as seq2seq tasks (`chart_info_task.mode`).

* `task1` (chart classification): Pix2Struct reads the chart alone (no header) and writes the
  normalized class name (`grouped_vertical_bar`). The output is mapped to a class by
  `nearest_class`: normalized (lower case, runs of spaces/hyphens/underscores -> "_"), an exact
  match first, else the class at the smallest character edit distance (ties: the first in the
  class list); an empty output stays "" and is wrong. Scored with `metrics.chart_info.task1`
  (average per-class F, mean P/R, accuracy; single-series grouped/stacked bars interchangeable).
* `task3` (text-role classification): one record per text block, id `<chart id>/<block id>`;
  a T5 text model reads "chart: <type> | text: <text> | box: x=.. y=.. w=.. h=.." (the box
  divided by the image size) and writes the role, mapped to a role as in task 1. Records are
  regrouped per chart into the official task-3 output for `metrics.chart_info.task3`. Blocks
  with no role annotation have no target: skipped, counted in `num_blocks_without_role`.
* `task6b` (data extraction): DePlot-style chart -> table (the deplot task's CHART-Info source); the
  predicted table is turned into official task-6 data series (`table_series`) for
  `metrics.chart_info_series.task6b` (`task6b_*` metrics); RMS/RNSS are reported as well.
Charts whose file does not annotate the task (`has_task<N>` False; task 3 also needs task 2's
blocks; task 6b needs data series) are skipped and counted in `num_unannotated`.

The CHART-Info room (tasks/chart_info/): these tasks; text.py (tasks 2, 4, 5 and 6a as
lines), lines.py (their grammar), tables.py (annotations -> DePlot-style tables, also read by
the deplot and matcha tasks).
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

import gin

from chartjax.data import sources
from chartjax.data import tables as data_tables  # `tables` is this room's tables.py
from chartjax.tasks.chart_info import tables as chart_info_tables
from chartjax.tasks.core import report_views, seq2seq
from chartjax.tasks.core.task import FileScorer, ScoreInputs, Task, describe

MODES = ("task1", "task3", "task6b")
# Normalized class names (tfds_builders/chart_info/annotations.normalize_chart_type of the
# official strings, docs/corpora.md §3.3-3.4).
CLASSES = {
    "synthetic_2019": (
        "pie",
        "donut",
        "vertical_box",
        "horizontal_box",
        "grouped_vertical_bar",
        "grouped_horizontal_bar",
        "stacked_vertical_bar",
        "stacked_horizontal_bar",
        "line",
        "scatter",
    ),
    "pmc_2020": (
        "horizontal_bar",
        "vertical_bar",
        "vertical_box",
        "horizontal_box",
        "horizontal_interval",
        "vertical_interval",
        "manhattan",
        "map",
        "surface",
        "venn",
        "scatter",
        "pie",
        "line",
        "scatter_line",
        "area",
        "heatmap",
    ),
}
# Synthetic roles first (docs/metrics.md §3.3), then the PMC additions.
ROLES = (
    "chart_title",
    "axis_title",
    "tick_label",
    "legend_label",
    "legend_title",
    "tick_grouping",
    "value_label",
    "mark_label",
    "other",
)
TASK3_KEYS = (
    "id",
    "image",
    "chart_type",
    "has_task2",
    "has_task3",
    "text_blocks.id",
    "text_blocks.text",
    "text_blocks.bbox",
    "text_roles.id",
    "text_roles.role",
)
TASK1_KEYS = ("id", "chart_type", "has_task1", "has_task6", "data_series_json")


def normalize_label(text: str) -> str:
    return re.sub(r"[\s\-_]+", "_", text.strip().lower()).strip("_")


def nearest_class(text: str, classes: Sequence[str]) -> tuple[str, bool]:
    """(class, exact) for a generated text: exact normalized match, else the nearest by edit
    distance (ties: first in `classes`); "" for an empty output."""
    import editdistance

    label = normalize_label(text)
    if label in classes:
        return label, True
    if not label:
        return "", False
    return min(classes, key=lambda c: editdistance.eval(label, c)), False


def _spaced(label: str) -> str:
    """Normalized class -> the metric's lower-case form ("grouped vertical bar")."""
    return label.replace("_", " ")


# ------------------------------------------------------------------ task 6b: table -> series


def table_series(text: str, chart_type: str, box_layout: str = "dict") -> list[dict]:
    """A predicted linearized table -> official task-6 "data series" (inverse of deplot's
    derivation): one series per value column named by its header (a one-column scatter: name
    ""), points (row label, cell) for non-empty cells; box plots one box per row, as a 2019
    dict series named by the row (`box_layout="dict"`) or a PMC list item with `x`."""
    table = data_tables.parse(text)
    rows = [r for r in table.rows if r]
    if "box" in chart_type:
        boxes = []
        for row in rows:
            stats = {}
            for stat, cell in zip(chart_info_tables.BOX_STATS, row[1:]):
                try:
                    stats[stat] = float(cell)
                except ValueError:
                    continue
            if len(stats) == len(chart_info_tables.BOX_STATS):
                boxes.append((row[0], stats))
        if box_layout == "dict":
            return [{"name": label, "data": stats} for label, stats in boxes]
        return [{"name": "", "data": [{"x": label, **stats} for label, stats in boxes]}]
    names = list(table.header[1:])
    if chart_type == "scatter" and len(names) == 1:
        names = [""]
    return [
        {
            "name": name,
            "data": [{"x": row[0], "y": row[j]} for row in rows if len(row) > j and row[j] != ""],
        }
        for j, name in enumerate(names, start=1)
    ]


def _box_layout(series: list[dict]) -> str:
    return "dict" if any(isinstance(s.get("data"), dict) for s in series) else "list"


# ------------------------------------------------------------------ records ---------------


def _image_size(data: bytes) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:  # reads the header only
        return im.size


def task3_prompt(chart_type: str, text: str, bbox: Sequence[float], size: tuple[int, int]) -> str:
    w, h = size
    x0, y0, bw, bh = bbox
    return (
        f"chart: {chart_type} | text: {chart_info_tables.block_text(text)} | box: x={x0 / w:.2f} "
        f"y={y0 / h:.2f} w={bw / w:.2f} h={bh / h:.2f}"
    )


def task3_records(example: dict) -> list[dict]:
    if not (example["has_task2"] and example["has_task3"]):
        return []
    roles = dict(zip(example["text_roles.id"], example["text_roles.role"]))
    size = _image_size(example["image"])
    out = []
    for block_id, text, bbox in zip(
        example["text_blocks.id"], example["text_blocks.text"], example["text_blocks.bbox"]
    ):
        if block_id not in roles:
            continue
        out.append(
            {
                "id": f"{example['id']}/{block_id}",
                "prompt": task3_prompt(example["chart_type"], text, bbox, size),
                "target": roles[block_id],
                "meta": {
                    "chart": example["id"],
                    "block": int(block_id),
                    "chart_type": example["chart_type"],
                },
            }
        )
    return out


def task1_records(example: dict) -> list[dict]:
    import json

    if not example["has_task1"]:
        return []
    text = example["data_series_json"]
    series = json.loads(text) if example["has_task6"] and text else None
    return [
        {
            "id": example["id"],
            "prompt": "",
            "target": example["chart_type"],
            "meta": {"num_series": None if series is None else len(series)},
        }
    ]


def count_skipped(builder_dir: str, split: str, mode: str) -> dict[str, int]:
    """num_unannotated (+ num_blocks_without_role for task 3) over the whole split."""
    if mode != "task3":
        return {
            "num_unannotated": chart_info_tables.count_unannotated(
                builder_dir, split, 1 if mode == "task1" else 6
            )
        }
    import numpy as np

    from chartjax.data import tfds_records

    charts = blocks = 0
    for ex in tfds_records.split_examples(builder_dir, split):
        if not (ex["has_task2"] and ex["has_task3"]):
            charts += 1
            continue
        blocks += int(np.sum(~np.isin(ex["text_blocks"]["id"], ex["text_roles"]["id"])))
    return {"num_unannotated": charts, "num_blocks_without_role": blocks}


# ------------------------------------------------------------------ scoring ---------------


def task1_scores(texts, records, classes, compat):
    from chartjax.metrics import chart_info as ci

    mapped = [nearest_class(t, classes) for t in texts]
    gt = {r["id"]: {"task1": {"output": {"chart_type": _spaced(r["target"])}}} for r in records}
    pred = {
        r["id"]: {"task1": {"output": {"chart_type": _spaced(label)}}}
        for r, (label, _) in zip(records, mapped)
    }
    # 2019 single_bars.txt rule [inferred]: grouped/stacked bars with one data series.
    ambiguous = {
        r["id"]
        for r in records
        if r["meta"].get("num_series") == 1
        and ("grouped" in r["target"] or "stacked" in r["target"])
    }
    scores = ci.task1(gt, pred, compat=compat, ambiguous_ids=ambiguous)
    scores.metrics["num_inexact"] = sum(not exact for _, exact in mapped)
    return scores, [{"label": label} for label, _ in mapped]


def task3_scores(texts, records, compat):
    from chartjax.metrics import chart_info as ci

    mapped = [nearest_class(t, ROLES) for t in texts]
    gt: dict[str, dict] = {}
    pred: dict[str, dict] = {}
    for r, (label, _) in zip(records, mapped):
        chart, block = r["meta"]["chart"], r["meta"]["block"]
        for doc, role in ((gt, r["target"]), (pred, label)):
            doc.setdefault(chart, {"task3": {"output": {"text_roles": []}}})
            doc[chart]["task3"]["output"]["text_roles"].append({"id": block, "role": role})
    scores = ci.task3(gt, pred, compat=compat)
    scores.metrics["accuracy"] = sum(
        label == r["target"] for r, (label, _) in zip(records, mapped)
    ) / len(records)
    scores.metrics["num_inexact"] = sum(not exact for _, exact in mapped)
    scores.metrics["num_charts"] = len(gt)
    return scores, [{"label": label} for label, _ in mapped]


def task6b_scores(texts, records, compat):
    from chartjax.metrics import chart_info as ci

    scores, extra = chart_info_tables.table_scores(texts, records)
    gt, pred = {}, {}
    for text, r in zip(texts, records):
        meta = r["meta"]
        gt[r["id"]] = {
            "task1": {"output": {"chart_type": meta["chart_type_raw"]}},
            "task6": {"output": {"data series": meta["data_series"]}},
        }
        series = table_series(text, meta["chart_type"], _box_layout(meta["data_series"]))
        pred[r["id"]] = {"task6": {"output": {"data series": series}}}
    s6 = ci.task6b(gt, pred, compat=compat)
    scores.metrics.update(
        {f"task6b_{k}": v for k, v in s6.metrics.items() if k != "num_unannotated"}
    )
    scores.breakdowns["task6b_chart_type"] = s6.breakdowns["chart_type"]
    return scores, extra


# ------------------------------------------------------------------ the task --------------


@gin.configurable("chart_info_task")
def make_task(
    data_dir: str = "~/tensorflow_datasets",
    mode: str = "task1",
    config: str = "synthetic_2019",
    train_split: str = "train[:95%]",
    eval_splits: Sequence[str] = ("train[95%:]",),
    compat: str = "spec",
    classes: Sequence[str] | None = None,
    prompt: str = data_tables.DEPLOT_PROMPT,
    shuffle_buffer: int = 10_000,
    features: seq2seq.Features | None = None,
    decoding: seq2seq.Decoding | None = None,
) -> Task:
    """CHART-Info task `mode` over `chart_info/<config>` (only `train` is built: the default
    holds out its last 5 %). `compat` selects the metric flavour (metrics.chart_info);
    `classes` (task 1) defaults to the config's class list; `prompt` is task 6b's header."""
    from chartjax.metrics.chart_info import check_compat

    check_compat(compat)
    if mode not in MODES:
        raise ValueError(f"chart_info_task.mode must be one of {MODES}, not {mode!r}")
    if config not in CLASSES:
        raise ValueError(f"chart_info_task.config must be one of {sorted(CLASSES)}")
    features = features or seq2seq.Features()  # recipes set modality: "text" for task 3
    decoding = decoding or seq2seq.Decoding()
    class_list = tuple(classes or CLASSES[config])
    dataset = f"chart_info/{config}"
    encoded = ()
    if mode == "task1":
        keys, expand = TASK1_KEYS, task1_records
    elif mode == "task3":
        keys, expand, encoded = TASK3_KEYS, task3_records, ("image",)
    else:
        keys = chart_info_tables.CHART_INFO_KEYS

        def expand(example):
            record = chart_info_tables.chart_info_record(example, prompt)
            return [] if record is None else [record]

    skipped: dict[str, dict[str, int]] = {}

    def score_fn(texts, records, split):
        if not records:
            raise ValueError(f"chart_info {mode}: split {split!r} has no annotated record")
        if mode == "task1":
            scores, extra = task1_scores(texts, records, class_list, compat)
        elif mode == "task3":
            scores, extra = task3_scores(texts, records, compat)
        else:
            scores, extra = task6b_scores(texts, records, compat)
        if split not in skipped:  # the data does not change between evaluations
            skipped[split] = count_skipped(sources.tfds_builder_dir(dataset, data_dir), split, mode)
        scores.metrics.update(skipped[split])
        return scores, extra

    return seq2seq.make_task(
        name=f"chart_info_{mode}",
        dataset=dataset,
        data_dir=data_dir,
        train_split=train_split,
        eval_splits=tuple(eval_splits),
        field_keys=keys,
        expand=expand,
        score_fn=score_fn,
        features=features,
        decoding=decoding,
        shuffle_buffer=shuffle_buffer,
        encoded_keys=encoded,
        # task 6b is scored with DePlot's table metrics: its rows read as DePlot's
        report_view=report_views.DEPLOT if mode == "task6b" else None,
    )


# ------------------------------------------------------------------ chartjax-score -----------


def _json_scorer(task: str):
    """Official per-image JSON folders scored by the official task metric (metrics.chart_info)."""

    def score(inputs: ScoreInputs):
        from chartjax.metrics import chart_info as ci

        opts = inputs.options
        sizes = opts.get("image_sizes")
        if task in ("4", "6a") and sizes is None:
            raise ValueError(
                f"chart_info_task{task} needs --images (image sizes set the thresholds)"
            )
        gt, compat = inputs.references, opts.get("compat", "spec")
        # Ids in `missing` (with --lenient also the files check_prediction refused) are left
        # out: the official metrics score an image without a prediction as wrong.
        pred = {k: v for k, v in inputs.predictions.items() if k not in inputs.missing}
        if task in ("4", "6a"):
            scores = getattr(ci, f"task{task}")(gt, pred, sizes, compat=compat)
        else:
            scores = getattr(ci, f"task{task}")(gt, pred, compat=compat)
        scores.libraries["chart_info"] = f"compat={compat}"
        return scores

    key = "task6" if task in ("6a", "6b") else f"task{task}"

    def check(obj) -> str | None:
        """A prediction file is a JSON object; its `task<N>` entry, where present, an object
        (or null: no prediction for that task, as in the official files)."""
        if not isinstance(obj, dict):
            return f"the file holds {describe(obj)}; expected a JSON object"
        entry = obj.get(key, obj.get("task1.4") if key == "task4" else None)
        if entry is not None and not isinstance(entry, dict):
            return f"{key!r} is {describe(entry)}; expected an object {{'output': ...}}"
        return None

    from chartjax.metrics.chart_info import COMPAT_MODES

    return FileScorer(
        f"chart_info_task{task}",
        "json_dir",
        score,
        compat=tuple(COMPAT_MODES),
        check_prediction=check,
    )


SCORERS = tuple(_json_scorer(k) for k in ("1", "2", "3", "4", "5", "6a", "6b"))
