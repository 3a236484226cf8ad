"""DePlot (Liu et al. 2023): chart image -> its data table as linearized text.

The prompt "Generate underlying data table of the figure below:" (docs/models.md §2.1) is
rendered as a header above the chart; the target is the table in DePlot's linearized format
(`chartjax.data.tables`: rows joined by newlines, which the vocabulary byte-falls back to
`<0x0A>`, cells by " | ", a first line "TITLE | <title>"). Scores: RMS precision/recall/F1 and
RNSS (`chartjax.metrics.tables`), overall and per chart type.

Sources (`deplot_task.source`):
* `chart_info`: the CHART-Info builder (either config). The table is derived from the
  example's task-6 data series (`chart_table`, rules below); the title is the text of the
  chart_title text block(s). Charts whose file does not annotate task 6 (2019 pies and donuts,
  PMC files with `null`) have no table: they are skipped and counted (`num_unannotated`).
* `statista`: Chart-to-Text's Statista gold tables (`table.linearized`) under a TITLE line.
* `chartqa`: a chartqa build's tables (tfds_builders/chartqa: ChartQA's `tables/<stem>.csv`,
  a `chartjax-synth chartqa` corpus or one's own charts), one example per chart (charts
  without questions included), id the table's stem. The CSV's rows joined as DePlot's
  `evaluate_chart_to_table._to_markdown` joins them, under an empty title line ("TITLE | ":
  ChartQA's tables hold no title; docs/models.md §2.1); chart type from the annotation's
  `type` (full release only), else "unknown".
* `plotqa`: a plotqa build (tfds_builders/plotqa, `config` v1 or v2: the same plots and tables;
  the PlotQA release or a `chartjax-synth plotqa` corpus), one example per plot, id its
  `image_index`. PlotQA ships no tables: the build derives each plot's CSV from its
  `annotations.json` entry (tfds_builders/plotqa/plotqa_table.py): the header row is the
  category axis's title (`general_figure_info.<x_axis|y_axis>.label.text`) and one column per
  series (each `models[i].label`, else `name`); the rows are the categories (the `x` values, or
  `y` for horizontal bars whose categories are on `y`), each with every series' value at it.
  The target is that CSV's rows joined by " | " under "TITLE | <general_figure_info.title.text>"
  (`plotqa_table_target`; "" when the entry has no title); chart type the plot's `type`.

The CHART-Info table derivation is chartjax/tasks/chart_info/tables.py's.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import pathlib
import re
from collections.abc import Sequence

import gin

from chartjax.data import sources, tables
from chartjax.metrics.prediction_files import TEXTS, check_fields
from chartjax.tasks.chart_info.tables import (
    CHART_INFO_KEYS,
    block_text,
    chart_info_record,
    count_unannotated,
    table_scores,
)
from chartjax.tasks.core import report_views, seq2seq
from chartjax.tasks.core.task import FileScorer, InferenceSpec, ScoreInputs, Task, text_prediction

PROMPT = tables.DEPLOT_PROMPT
SOURCES = ("chart_info", "statista", "chartqa", "plotqa")
# The build each source reads by default (`deplot_task.config` picks another).
DEFAULT_CONFIG = {"chart_info": "synthetic_2019", "plotqa": "v1"}


# ------------------------------------------------------------------ the task -------------


def _statista_record(example: dict, prompt: str) -> list[dict]:
    title = block_text(example["title"]).replace(tables.CELL_SEP, " / ")
    target = (
        f"{tables.TITLE_PREFIX}{tables.CELL_SEP}{title}{tables.ROW_SEP}"
        + example["table.linearized"]
    )
    return [
        {
            "id": example["id"],
            "prompt": prompt,
            "target": target,
            "meta": {"chart_type": example["chart_type"]},
        }
    ]


def chartqa_table_target(table_csv: str) -> str:
    """A chartqa build's table CSV as DePlot's target: "TITLE | ", then the CSV's rows (blank
    lines dropped), cells joined by " | "."""
    rows = [r for r in csv.reader(io.StringIO(table_csv)) if any(c.strip() for c in r)]
    header, body = (rows[0], rows[1:]) if rows else ([], [])
    return tables.linearize(header, body, title="")


def _chartqa_record(example: dict, prompt: str) -> list[dict]:
    chart_type = "unknown"
    if example["annotation"]:
        annotation = json.loads(example["annotation"])
        if isinstance(annotation, dict) and isinstance(annotation.get("type"), str):
            chart_type = annotation["type"]
    return [
        {
            "id": pathlib.PurePosixPath(example["id"]).stem,
            "prompt": prompt,
            "target": chartqa_table_target(example["table"]),
            "meta": {"chart_type": chart_type},
        }
    ]


def plotqa_title(annotation_json: str) -> str:
    """The title of a plotqa build's annotation (`general_figure_info.title.text`), or ""."""
    try:
        info = json.loads(annotation_json)["general_figure_info"]
        title = info["title"]["text"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return ""
    return title if isinstance(title, str) else ""


def plotqa_table_target(table_csv: str, annotation_json: str) -> str:
    """A plotqa build's derived table CSV as DePlot's target, under its annotation's title."""
    rows = [r for r in csv.reader(io.StringIO(table_csv)) if any(c.strip() for c in r)]
    header, body = (rows[0], rows[1:]) if rows else ([], [])
    return tables.linearize(header, body, title=plotqa_title(annotation_json))


def _plotqa_record(example: dict, prompt: str) -> list[dict]:
    return [
        {
            "id": example["id"],
            "prompt": prompt,
            "target": plotqa_table_target(example["table"], example["annotation"]),
            "meta": {"chart_type": example["plot_type"] or "unknown"},
        }
    ]


@gin.configurable("deplot_task")
def make_task(
    data_dir: str = "~/tensorflow_datasets",
    source: str = "chart_info",
    config: str | None = None,
    train_split: str | None = None,
    eval_splits: Sequence[str] | None = None,
    prompt: str = PROMPT,
    shuffle_buffer: int = 10_000,
    features: seq2seq.Features | None = None,
    decoding: seq2seq.Decoding | None = None,
) -> Task:
    """DePlot chart -> table over CHART-Info (`config`: synthetic_2019, the default, or
    pmc_2020), Statista, a chartqa build's tables or a plotqa build's (`config`: v1, the
    default, or v2; both hold the same plots).

    Default splits: CHART-Info builds only `train`, so train on `train[:95%]` and evaluate on
    `train[95%:]`; Statista, chartqa and plotqa train on `train` and evaluate `validation` and
    `test`.
    """
    if source not in SOURCES:
        raise ValueError(f"deplot_task.source must be one of {SOURCES}, not {source!r}")
    config = config or DEFAULT_CONFIG.get(source)
    features = features or seq2seq.Features()
    decoding = decoding or seq2seq.Decoding()
    if source == "chart_info":
        dataset, keys = f"chart_info/{config}", CHART_INFO_KEYS
        default_train, default_eval = "train[:95%]", ("train[95%:]",)

        def expand(example):
            record = chart_info_record(example, prompt)
            return [] if record is None else [record]
    elif source == "chartqa":
        dataset, keys = "chartqa", ("id", "table", "annotation")
        default_train, default_eval = "train", ("validation", "test")

        def expand(example):
            return _chartqa_record(example, prompt)
    elif source == "plotqa":
        if config not in ("v1", "v2"):
            raise ValueError(f"deplot_task.config of plotqa must be v1 or v2, not {config!r}")
        dataset, keys = f"plotqa/{config}", ("id", "table", "annotation", "plot_type")
        default_train, default_eval = "train", ("validation", "test")

        def expand(example):
            return _plotqa_record(example, prompt)
    else:
        dataset, keys = "chart_to_text/statista", ("id", "title", "chart_type", "table.linearized")
        default_train, default_eval = "train", ("validation", "test")

        def expand(example):
            return _statista_record(example, prompt)

    skipped: dict[str, int] = {}  # per split: the data does not change between evaluations

    def score_fn(texts, records, split):
        scores, extra = table_scores(texts, records)
        if source == "chart_info":
            if split not in skipped:
                builder_dir = sources.tfds_builder_dir(dataset, data_dir)
                skipped[split] = count_unannotated(builder_dir, split, 6)
            scores.metrics["num_unannotated"] = skipped[split]
        return scores, extra

    task = seq2seq.make_task(
        name="deplot",
        dataset=dataset,
        data_dir=data_dir,
        train_split=train_split or default_train,
        eval_splits=tuple(eval_splits or default_eval),
        field_keys=keys,
        expand=expand,
        score_fn=score_fn,
        features=features,
        decoding=decoding,
        shuffle_buffer=shuffle_buffer,
        report_view=report_views.DEPLOT,
    )
    if source in ("chartqa", "plotqa"):  # a chart per example, not a question per example
        task = dataclasses.replace(task, source=dataclasses.replace(task.source, per_record=True))
    return task


# ------------------------------------------------------------------ inference, scoring -------


def table_file(id_: str, used: set[str]) -> str:
    """`tables/<id>.csv` relative path, "/" kept as folders, other characters sanitized."""
    parts = [re.sub(r"[^A-Za-z0-9._-]", "_", p) for p in id_.split("/")]
    parts = ["_" if p in ("", ".", "..") else p for p in parts]
    stem = "/".join(["tables", *parts])
    rel, n = stem + ".csv", 1
    while rel in used:
        n += 1
        rel = f"{stem}~{n}.csv"
    used.add(rel)
    return rel


def write_table(out_dir: str, rel: str, table) -> None:
    path = os.path.join(out_dir, *rel.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        if table.header:
            w.writerow(table.header)
        w.writerows(table.rows)


def write_outputs(row: dict, out_dir: str, used: set[str]) -> None:
    """The parsed table in the row (`table`) and as `tables/<id>.csv` (`table_file`)."""
    table = tables.parse(row["prediction"])
    row["table"] = {
        "title": table.title,
        "header": list(table.header),
        "rows": [list(r) for r in table.rows],
    }
    row["table_file"] = table_file(row["id"], used)
    write_table(out_dir, row["table_file"], table)


INFERENCE = InferenceSpec(
    name="deplot",
    modality="image",
    default_template="deplot",
    templates={"deplot": PROMPT},
    target_field="table.linearized",
    write_outputs=write_outputs,
    output_dirs=("tables",),
)


def _score_files(inputs: ScoreInputs):
    from chartjax.metrics import tables as table_metrics

    check_fields(inputs.references, {"target": TEXTS})
    ids = list(inputs.references)
    # A missing prediction (None) is wrong in every metric; the empty table would not be (its
    # RMS precision is vacuously 1, and its RNSS is 1 against a table without numbers).
    outputs = [
        None if i in inputs.missing else str(inputs.predictions[i]["prediction"]) for i in ids
    ]
    targets = [inputs.references[i]["target"] for i in ids]
    return table_metrics.rms(outputs, targets).update(table_metrics.rnss(outputs, targets))


SCORER = FileScorer("deplot", "jsonl", _score_files, check_prediction=text_prediction)
