"""ChartQA-style synthetic corpus in the ChartQA release layout (Masry et al., 2022).

    chartjax-synth chartqa --out DIR --train-charts N --val-charts M --test-charts K \\
        [--seed S] [--questions 2] [--size 800x600] [--value-labels 10] [--workers W] \\
        [--kinds retrieval,max] [--types ...] [--max-categories 3] [--max-topics 4] \\
        [--max-series 1] [--text-grid 32] [--tick-size 20]

writes, for each split folder `train/`, `val/`, `test/` (the release's names; the builder reads
`val/` as its `validation` split):

    png/<stem>.png          the chart, drawn by the CHART-Info renderer (chart_info_render):
                            vertical or horizontal bars, or lines; one series or several
    tables/<stem>.csv       the table it was drawn from: header row (category axis title,
                            series names), one row per category, numbers as drawn
    <folder>_human.json     [{"imgname", "query", "label"}, ...]: human-style wordings
    <folder>_augmented.json the same for augmented-style wordings

No `annotations/` (as the first public version). Stems follow the release's Statista names:
`two_col_<i>` for one series (a two-column table), `multi_col_<i>` for several. Each chart gets
`--questions` questions of distinct kinds per file, their answers computed from its table
(chartqa_questions: retrieval, highest / lowest, greater, difference, sum, average).

The bracketed options after `--workers` depart from ChartQA's mix for quick learning checks
(tools/bench/benches.py's `chartqa_learning`): only these question kinds, chart types, at most so
many categories, topics (chart_info_tables.synthesize) and series, the value and category
labels on a lattice of that many pixels (chartjax-synth chart_info's `--text-grid`), and tick
labels at a font size of their own, category names unrotated. Left out, each keeps the default
corpus byte for byte.

Determinism: chart i of a split draws everything from `SeedSequence([seed, split id, i])`, so
the bytes depend on the seed alone, never on the worker count. The splits are written into
`<out>.incomplete-*` beside `out` and moved into it when all are complete; a split folder of
`out` that already holds files is refused unless `overwrite` (as `chartjax-synth figureqa`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from chartjax.synth import chart_info
from chartjax.synth import chart_info_tables as tb
from chartjax.synth import chartqa_questions as cq
from chartjax.synth.chart_info_render import LayoutError, render
from chartjax.synth.chart_info_style import sample_style
from chartjax.synth.figureqa_render import encode_png

# Release folder -> stable id entering the seeds; never renumber (changes every corpus).
SPLIT_IDS = {"train": 1, "val": 2, "test": 3}
CHART_TYPES = (tb.GROUPED_VBAR, tb.GROUPED_HBAR, tb.LINE)
DEFAULT_SIZE = (800, 600)  # ChartQA's Statista charts are about 800 px wide [unverified]
MAX_TABLES = 5  # tables drawn for a chart before giving up (each with chart_info.MAX_STYLES styles)


@dataclasses.dataclass(frozen=True)
class ChartJob:
    seed: int
    folder: str
    index: int
    size: tuple[int, int]
    questions: int
    value_labels: float | None
    kinds: tuple[str, ...] = cq.KINDS
    types: tuple[str, ...] = CHART_TYPES
    max_categories: int | None = None
    max_topics: int | None = None
    max_series: int | None = None
    text_grid: int = 0
    tick_size: float | None = None


@dataclasses.dataclass(frozen=True)
class Chart:
    stem: str
    png: bytes
    table: cq.Table
    qa: dict[str, list[tuple[str, str]]]  # source -> [(query, label)]


def chart_rng(seed: int, folder: str, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, SPLIT_IDS[folder], index]))


def make_chart(job: ChartJob) -> Chart:
    """Chart `job.index` of split `job.folder`: drawn, tabled and questioned."""
    rng = chart_rng(job.seed, job.folder, job.index)
    chart_type = job.types[int(rng.integers(len(job.types)))]
    max_series = 1 if rng.random() < 0.5 else job.max_series  # half are single-series (two_col_*)
    override = {"width": job.size[0], "height": job.size[1]}
    if job.value_labels:
        override["value_label_size"] = float(job.value_labels)
    if job.text_grid:
        override["text_grid"] = int(job.text_grid)
    if job.tick_size:  # category names as large as the values, never slanted
        override.update(tick_size=float(job.tick_size), cat_rotation=0)
    for _ in range(MAX_TABLES):
        data = tb.synthesize(rng, chart_type, job.max_categories, job.max_topics, max_series)
        for _ in range(chart_info.MAX_STYLES):
            style = dataclasses.replace(sample_style(rng, data), **override)
            try:
                drawn = render(data, style)
            except LayoutError:
                continue
            table = cq.Table(
                (data.x_label, *data.series),
                tuple((c, *row) for c, row in zip(data.categories, data.cells)),
            )
            kind = "two_col" if len(data.series) == 1 else "multi_col"
            qa = {s: cq.questions(rng, table, s, job.questions, job.kinds) for s in cq.SOURCES}
            png = rgb_png(drawn.rgba())
            return Chart(f"{kind}_{job.index}", png, table, qa)
    raise ValueError(
        f"{job.folder} chart {job.index}: no style fits {job.size[0]}x{job.size[1]} "
        f"({MAX_TABLES} tables x {chart_info.MAX_STYLES} styles); give a larger --size"
    )


def rgb_png(rgba: np.ndarray) -> bytes:
    """An 8-bit RGB PNG, which the builder stores as read (RGBA it re-encodes, about 2x the
    bytes); any transparency is composited on white, as the builder would."""
    alpha = rgba[:, :, 3:]
    if (alpha == 255).all():  # the renderer's charts are opaque
        return encode_png(rgba[:, :, :3])
    a = alpha.astype(np.uint32)
    rgb = (rgba[:, :, :3] * a + 255 * (255 - a) + 127) // 255
    return encode_png(rgb.astype(np.uint8))


def in_workers(make, jobs: list, workers: int):
    """`make(job)` for each job, in order, in `workers` processes (here when 1). The PlotQA
    generator draws its plots through it too."""
    if workers <= 1:
        yield from map(make, jobs)
        return
    # spawn: safe even when the parent has threads (jax, tf); each chart is independent.
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        yield from pool.imap(make, jobs, chunksize=max(1, min(16, len(jobs) // workers)))


def generate_split(root: Path, jobs: list[ChartJob], workers: int) -> dict:
    """Writes one split folder under `root` (which must not hold it yet); returns its counts."""
    folder = jobs[0].folder
    split_dir = root / folder
    (split_dir / "png").mkdir(parents=True)
    (split_dir / "tables").mkdir()
    entries: dict[str, list[dict]] = {s: [] for s in cq.SOURCES}
    for chart in in_workers(make_chart, jobs, workers):
        (split_dir / "png" / f"{chart.stem}.png").write_bytes(chart.png)
        (split_dir / "tables" / f"{chart.stem}.csv").write_text(chart.table.to_csv())
        for source, pairs in chart.qa.items():
            entries[source] += [
                {"imgname": f"{chart.stem}.png", "query": q, "label": a} for q, a in pairs
            ]
    for source, rows in entries.items():
        with open(split_dir / f"{folder}_{source}.json", "w", encoding="utf-8") as f:
            json.dump(rows, f, ensure_ascii=False, indent=1)
    return {"split": folder, "charts": len(jobs), **{s: len(r) for s, r in entries.items()}}


def _check_free(out: Path, folders: list[str], overwrite: bool) -> None:
    """Refuses, before anything is drawn, to replace a split folder that holds files."""
    if overwrite:
        return
    for folder in folders:
        path = out / folder
        if path.exists() and any(path.iterdir()):
            raise FileExistsError(
                f"{path} exists and is not empty (pass overwrite=True / --overwrite)"
            )


def generate(
    out_dir: str | os.PathLike,
    train_charts: int = 0,
    val_charts: int = 0,
    test_charts: int = 0,
    seed: int = 0,
    questions: int = 2,
    size: tuple[int, int] = DEFAULT_SIZE,
    value_labels: float | None = None,
    workers: int = 1,
    overwrite: bool = False,
    kinds: Sequence[str] = cq.KINDS,
    types: Sequence[str] | None = None,
    max_categories: int | None = None,
    max_topics: int | None = None,
    max_series: int | None = None,
    text_grid: int = 0,
    tick_size: float | None = None,
) -> list[dict]:
    """Writes the requested splits under `out_dir`; returns one summary per split."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    kinds = tuple(kinds)
    if not kinds or set(kinds) - set(cq.KINDS) or len(set(kinds)) < len(kinds):
        raise ValueError(f"kinds: distinct question kinds of {cq.KINDS}, got {kinds}")
    if not 1 <= questions <= len(kinds):
        raise ValueError(f"questions: 1 to {len(kinds)} per chart and file, got {questions}")
    chart_types = CHART_TYPES if types is None else chart_info.parse_types(types)
    if set(chart_types) - set(CHART_TYPES):
        raise ValueError(f"types: ChartQA's generator draws {CHART_TYPES}, got {chart_types}")
    tb.check_caps(max_categories, max_topics, max_series)
    if not 0 <= text_grid <= 64:
        raise ValueError(f"text_grid: a lattice side in pixels, 0 (off) to 64, got {text_grid}")
    if tick_size is not None and not 0 < tick_size <= 72:
        raise ValueError(f"tick_size: a point size in (0, 72], got {tick_size}")
    if min(size) < 64:
        raise ValueError(f"size: {size} is too small for a chart (at least 64 x 64 pixels)")
    counts = {"train": train_charts, "val": val_charts, "test": test_charts}
    if any(n < 0 for n in counts.values()):
        raise ValueError(f"chart counts must be >= 0, got {counts}")
    folders = [f for f, n in counts.items() if n]
    if not folders:
        raise ValueError("no charts requested (train, val and test sizes are all 0)")
    out = Path(out_dir).absolute()
    _check_free(out, folders, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.incomplete-{os.getpid()}-{secrets.token_hex(4)}")
    tmp.mkdir()
    options = (kinds, chart_types, max_categories, max_topics, max_series, text_grid, tick_size)
    try:
        summaries = []
        for folder in folders:
            jobs = [
                ChartJob(seed, folder, i, tuple(size), questions, value_labels, *options)
                for i in range(counts[folder])
            ]
            summaries.append(generate_split(tmp, jobs, workers))
        if not out.exists():
            os.rename(tmp, out)
        else:
            for folder in folders:
                if (out / folder).exists():
                    shutil.rmtree(out / folder)  # checked free or overwrite: only now, all done
                os.rename(tmp / folder, out / folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summaries


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="output folder (the builder's manual_dir)")
    parser.add_argument("--train-charts", type=int, default=0, help="charts in train/")
    parser.add_argument("--val-charts", type=int, default=0, help="charts in val/")
    parser.add_argument("--test-charts", type=int, default=0, help="charts in test/")
    parser.add_argument("--seed", type=int, default=0, help="same seed, same corpus")
    parser.add_argument(
        "--questions",
        type=int,
        default=2,
        help=f"questions per chart in each of the human and augmented files (1-{len(cq.KINDS)})",
    )
    parser.add_argument(
        "--size",
        type=chart_info.parse_size,
        default=DEFAULT_SIZE,
        help="image size WIDTHxHEIGHT in pixels (default 800x600)",
    )
    parser.add_argument(
        "--value-labels",
        type=float,
        default=None,
        metavar="POINTS",
        help="print each bar's value on it at this font size (default: off)",
    )
    parser.add_argument("--workers", type=int, default=1, help="rendering processes")
    parser.add_argument("--overwrite", action="store_true", help="replace existing split folders")
    parser.add_argument(
        "--kinds",
        type=lambda text: tuple(k.strip() for k in text.split(",")),
        default=cq.KINDS,
        help=f"comma-separated question kinds to ask (default: all, {','.join(cq.KINDS)})",
    )
    parser.add_argument(
        "--types",
        nargs="*",
        default=None,
        help=f"chart types to draw (default: all of {', '.join(CHART_TYPES)})",
    )
    parser.add_argument("--max-categories", type=int, default=None, help="cap on table rows")
    parser.add_argument(
        "--max-topics", type=int, default=None, help="topics from the first N built-in ones only"
    )
    parser.add_argument("--max-series", type=int, default=None, help="cap on series per chart")
    parser.add_argument(
        "--text-grid",
        type=int,
        default=0,
        metavar="PIXELS",
        help="value and category labels on this pixel lattice (chartjax-synth chart_info's "
        "--text-grid; default 0, off)",
    )
    parser.add_argument(
        "--tick-size",
        type=float,
        default=None,
        metavar="POINTS",
        help="tick labels at this font size, category names unrotated (default: the style's)",
    )


def run(args: argparse.Namespace) -> int:
    summaries = generate(
        args.out,
        train_charts=args.train_charts,
        val_charts=args.val_charts,
        test_charts=args.test_charts,
        seed=args.seed,
        questions=args.questions,
        size=args.size,
        value_labels=args.value_labels,
        workers=args.workers,
        overwrite=args.overwrite,
        kinds=args.kinds,
        types=args.types,
        max_categories=args.max_categories,
        max_topics=args.max_topics,
        max_series=args.max_series,
        text_grid=args.text_grid,
        tick_size=args.tick_size,
    )
    print(json.dumps({"out": os.path.abspath(args.out), "splits": summaries}, indent=1))
    return 0
