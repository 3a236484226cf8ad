"""PlotQA-style synthetic corpus in the PlotQA release layout (Methani et al., WACV 2020).

    chartjax-synth plotqa --out DIR --train-plots N --val-plots M --test-plots K \\
        [--seed S] [--size 640x480] [--pack-images] [--workers W]

writes, for each split folder `train/`, `val/`, `test/` (the builder reads `val/` as its
`validation` split), in the layout of docs/corpora.md §8.2:

    png/<image_index>.png   the plot, drawn by the CHART-Info renderer (chart_info_render, as
                            `chartjax-synth chartqa`): vertical bars, horizontal bars, lines or
                            dot-lines (lines with markers); one series or several
                            (`--pack-images`: the same files as members of `png.tar.gz`, the
                            download's form, and no png/)
    annotations.json        a list, one entry per plot: `image_index`, `type`
                            (vbar_categorical, hbar_categorical, line, dot_line), `models` (one
                            per series: `name` and `label` the legend text, `color`, `bboxes` in
                            pixels, `x`, `y`; horizontal bars hold the values in `x` and the
                            categories in `y`), `general_figure_info` (title, x_axis, y_axis
                            with `label.text`, legend, plot_info, figure_info)
    qa_pairs_V2.json        {"qa_pairs": [...]}: `image_index`, `question_string`, `answer` (a
                            JSON number or a string), `answer_bbox` ([]), `template`, `type` (the
                            plot type), `question_id` (unique in the split), `qid` (the chartjax
                            question kind); pairs in a shuffled order, not by plot
    qa_pairs_V1.json        the V2 pairs of the V1 templates (same question_id): V2 adds the
                            open-vocabulary arithmetic answers, as the release's V2 does

Templates: `structural` (how many legend labels), `data_retrieval` (a value), `min_max` (the
category of a series' highest / lowest value), `comparison` (is a series higher at one category
than another: Yes / No) and `arithmetic` (difference, sum, average; V2 only). Answers are
computed from the plotted table with chartqa_questions' exact decimal arithmetic; an ambiguous
question (a tie) is not asked. The wordings only imitate PlotQA's.

Determinism: plot i of a split draws everything from `SeedSequence([seed, split id, i])` and the
pair order from `SeedSequence([seed, split id])`, whatever the worker count. A non-empty `out`
is refused unless `overwrite`; the corpus is written beside it and moved in when complete.
"""

from __future__ import annotations

import argparse
import dataclasses
import decimal
import io
import json
import os
import secrets
import shutil
import tarfile
from pathlib import Path

import numpy as np

from chartjax.synth import chart_info
from chartjax.synth import chart_info_tables as tb
from chartjax.synth import chartqa_questions as cq
from chartjax.synth.chart_info_geometry import annotate
from chartjax.synth.chart_info_render import LayoutError, render
from chartjax.synth.chart_info_style import sample_style

# The seeds per split folder and the worker map are the ChartQA generator's.
from chartjax.synth.chartqa import SPLIT_IDS, chart_rng, in_workers, rgb_png

PLOT_TYPES = ("vbar_categorical", "hbar_categorical", "line", "dot_line")
_CHART_TYPES = {
    "vbar_categorical": tb.GROUPED_VBAR,
    "hbar_categorical": tb.GROUPED_HBAR,
    "line": tb.LINE,
    "dot_line": tb.LINE,
}
DEFAULT_SIZE = (640, 480)  # PlotQA's images are about this size [unverified]
MAX_TABLES = 5
V1_TEMPLATES = ("structural", "data_retrieval", "min_max", "comparison")
# chartqa_questions kind -> (PlotQA template, wording). Fields: {series}, {x} (the category axis
# title, lower-cased), {y} (the value axis title), {a}, {b} (two categories).
KINDS: dict[str, tuple[str, str]] = {
    "retrieval": ("data_retrieval", "What is the {y} of {series} in {a}?"),
    "max": ("min_max", "Which {x} has the highest {y} of {series}?"),
    "min": ("min_max", "Which {x} has the lowest {y} of {series}?"),
    "greater": ("comparison", "Is the {y} of {series} in {a} greater than that in {b}?"),
    "difference": (
        "arithmetic",
        "What is the difference between the {y} of {series} in {a} and in {b}?",
    ),
    "sum": ("arithmetic", "What is the sum of the {y} of {series} in {a} and in {b}?"),
    "average": ("arithmetic", "What is the average {y} of {series} per {x}?"),
}
STRUCTURAL = "How many legend labels are there?"
NUMERIC_KINDS = frozenset({"retrieval", "difference", "sum", "average"})  # JSON number answers


@dataclasses.dataclass(frozen=True)
class PlotJob:
    seed: int
    folder: str
    index: int
    size: tuple[int, int]


@dataclasses.dataclass(frozen=True)
class Plot:
    index: int
    png: bytes
    annotation: dict
    qa: list[dict]  # without question_id


def json_number(text: str) -> int | float:
    """A table cell or answer as a JSON number: integral values as ints."""
    value = decimal.Decimal(text)
    return int(value) if value == value.to_integral_value() else float(value)


def _color(rgb) -> str:
    return "#" + "".join(f"{round(float(c) * 255):02x}" for c in rgb[:3])


def _box(bb: dict) -> dict:
    return {"x": bb["x0"], "y": bb["y0"], "w": bb["width"], "h": bb["height"]}


def annotation_of(index: int, plot_type: str, drawn, data: tb.ChartData) -> dict:
    """The plot's annotations.json entry in PlotQA's schema (a look-alike: the field names of
    docs/corpora.md §8.2, values from the drawing)."""
    geometry = annotate(drawn)
    visual = geometry["visual elements"]
    horizontal = plot_type == "hbar_categorical"
    boxes: list[list[dict]] = [[] for _ in data.series]
    if drawn.bars:
        for (_, k, *_), bb in zip(drawn.bars, visual["bars"]):
            boxes[k].append(_box(bb))
    else:
        for k, points in enumerate(visual["lines"]):
            boxes[k] = [{"x": p["x"], "y": p["y"], "w": 0, "h": 0} for p in points]
    models = []
    for k, name in enumerate(data.series):
        values = [json_number(row[k]) for row in data.cells]
        cats = list(data.categories)
        x, y = (values, cats) if horizontal else (cats, values)
        color = drawn.style.colors[k % len(drawn.style.colors)]
        models.append(
            {
                "name": name,
                "label": name,
                "color": _color(color),
                "bboxes": boxes[k],
                "x": x,
                "y": y,
            }
        )
    x_title, y_title = (data.y_label, data.x_label) if horizontal else (data.x_label, data.y_label)
    width, height = drawn.style.width, drawn.style.height
    return {
        "image_index": index,
        "type": plot_type,
        "models": models,
        "general_figure_info": {
            "title": {"text": data.title},
            "x_axis": {"label": {"text": x_title}},
            "y_axis": {"label": {"text": y_title}},
            "legend": {"items": [{"label": {"text": s}} for s in data.series]},
            "plot_info": {"bbox": _box(geometry["_plot_bb"])},
            "figure_info": {"bbox": {"x": 0, "y": 0, "w": width, "h": height}},
        },
    }


def questions_of(rng: np.random.Generator, table: cq.Table, y_title: str, plot_type: str):
    """Every kind once (a random series and categories), ambiguous ones left out."""
    out = [
        {
            "question_string": STRUCTURAL,
            "answer": len(table.series),
            "template": "structural",
            "qid": "structural",
        }
    ]
    for kind, (template, wording) in KINDS.items():
        if kind in cq.TWO_CATEGORY_KINDS and len(table.rows) < 2:
            continue
        series = table.series[int(rng.integers(len(table.series)))]
        order = rng.permutation(len(table.rows))
        a = table.categories[int(order[0])]
        b = table.categories[int(order[1])] if len(order) > 1 else ""
        label = cq.answer(table, kind, series, a, b)
        if label is None:
            continue
        text = wording.format(x=table.header[0].lower(), y=y_title, series=series, a=a, b=b)
        answer = json_number(label) if kind in NUMERIC_KINDS else label
        out.append({"question_string": text, "answer": answer, "template": template, "qid": kind})
    return [
        {
            "image_index": -1,
            "question_string": q["question_string"],
            "answer": q["answer"],
            "answer_bbox": [],
            "template": q["template"],
            "type": plot_type,
            "qid": q["qid"],
        }
        for q in out
    ]


def make_plot(job: PlotJob) -> Plot:
    rng = chart_rng(job.seed, job.folder, job.index)
    plot_type = PLOT_TYPES[int(rng.integers(len(PLOT_TYPES)))]
    max_series = 1 if rng.random() < 0.5 else None
    override = {"width": job.size[0], "height": job.size[1]}
    for _ in range(MAX_TABLES):
        data = tb.synthesize(rng, _CHART_TYPES[plot_type], max_series=max_series)
        for _ in range(chart_info.MAX_STYLES):
            style = dataclasses.replace(sample_style(rng, data), **override)
            if plot_type in ("line", "dot_line"):
                marker = "o" if plot_type == "dot_line" else ""
                style = dataclasses.replace(style, markers=(marker,) * len(data.series))
            try:
                drawn = render(data, style)
            except LayoutError:
                continue
            table = cq.Table(
                (data.x_label, *data.series),
                tuple((c, *row) for c, row in zip(data.categories, data.cells)),
            )
            annotation = annotation_of(job.index, plot_type, drawn, data)
            qa = questions_of(rng, table, data.y_label, plot_type)
            for q in qa:
                q["image_index"] = job.index
            return Plot(job.index, rgb_png(drawn.rgba()), annotation, qa)
    raise ValueError(
        f"{job.folder} plot {job.index}: no style fits {job.size[0]}x{job.size[1]}; "
        "give a larger --size"
    )


def generate_split(root: Path, folder: str, jobs: list[PlotJob], workers: int, pack: bool) -> dict:
    split_dir = root / folder
    split_dir.mkdir(parents=True)
    annotations, pairs = [], []
    tar = tarfile.open(split_dir / "png.tar.gz", "w:gz") if pack else None
    if not pack:
        (split_dir / "png").mkdir()
    try:
        for plot in in_workers(make_plot, jobs, workers):
            name = f"{plot.index}.png"
            if tar is None:
                (split_dir / "png" / name).write_bytes(plot.png)
            else:
                info = tarfile.TarInfo(f"png/{name}")
                info.size, info.mtime = len(plot.png), 0
                tar.addfile(info, io.BytesIO(plot.png))
            annotations.append(plot.annotation)
            for q in plot.qa:
                pairs.append({**q, "question_id": len(pairs)})
    finally:
        if tar is not None:
            tar.close()
    seed = jobs[0].seed
    order = np.random.default_rng(np.random.SeedSequence([seed, SPLIT_IDS[folder]])).permutation(
        len(pairs)
    )
    v2 = [pairs[int(i)] for i in order]  # not ordered by plot, as the release's need not be
    v1 = [q for q in v2 if q["template"] in V1_TEMPLATES]
    _write_json(split_dir / "annotations.json", annotations)
    _write_json(split_dir / "qa_pairs_V1.json", {"qa_pairs": v1})
    _write_json(split_dir / "qa_pairs_V2.json", {"qa_pairs": v2})
    return {"split": folder, "plots": len(jobs), "qa_pairs_v1": len(v1), "qa_pairs_v2": len(v2)}


def _write_json(path: Path, value) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False)


def generate(
    out_dir: str | os.PathLike,
    train_plots: int = 0,
    val_plots: int = 0,
    test_plots: int = 0,
    seed: int = 0,
    size: tuple[int, int] = DEFAULT_SIZE,
    pack_images: bool = False,
    workers: int = 1,
    overwrite: bool = False,
) -> list[dict]:
    """Writes the requested splits as `out_dir`; returns one summary per split."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if min(size) < 64:
        raise ValueError(f"size: {size} is too small for a plot (at least 64 x 64 pixels)")
    counts = {"train": train_plots, "val": val_plots, "test": test_plots}
    if any(n < 0 for n in counts.values()):
        raise ValueError(f"plot counts must be >= 0, got {counts}")
    folders = [f for f, n in counts.items() if n]
    if not folders:
        raise ValueError("no plots requested (train, val and test sizes are all 0)")
    out = Path(out_dir).absolute()
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"{out} exists and is not empty (pass overwrite=True / --overwrite)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.incomplete-{os.getpid()}-{secrets.token_hex(4)}")
    tmp.mkdir()
    try:
        summaries = []
        for folder in folders:
            jobs = [PlotJob(seed, folder, i, tuple(size)) for i in range(counts[folder])]
            summaries.append(generate_split(tmp, folder, jobs, workers, pack_images))
        if out.exists():
            shutil.rmtree(out)  # empty, or overwrite: only now, all done
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summaries


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="output folder (the builder's manual_dir)")
    parser.add_argument("--train-plots", type=int, default=0, help="plots in train/")
    parser.add_argument("--val-plots", type=int, default=0, help="plots in val/")
    parser.add_argument("--test-plots", type=int, default=0, help="plots in test/")
    parser.add_argument("--seed", type=int, default=0, help="same seed, same corpus")
    parser.add_argument(
        "--size",
        type=chart_info.parse_size,
        default=DEFAULT_SIZE,
        help="image size WIDTHxHEIGHT in pixels (default 640x480)",
    )
    parser.add_argument(
        "--pack-images", action="store_true", help="write png.tar.gz (the download's form)"
    )
    parser.add_argument("--workers", type=int, default=1, help="rendering processes")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty --out")


def run(args: argparse.Namespace) -> int:
    summaries = generate(
        args.out,
        train_plots=args.train_plots,
        val_plots=args.val_plots,
        test_plots=args.test_plots,
        seed=args.seed,
        size=args.size,
        pack_images=args.pack_images,
        workers=args.workers,
        overwrite=args.overwrite,
    )
    print(json.dumps({"out": os.path.abspath(args.out), "splits": summaries}, indent=1))
    return 0
