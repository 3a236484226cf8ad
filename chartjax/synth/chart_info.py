"""CHART-Info-style synthetic corpus in the ICDAR 2019 synthetic release layout.

    chartjax-synth chart_info --out DIR --num N --seed S --workers W [--types ...]
        [--size 640x480] [--max-categories 3] [--max-topics 4] [--max-series 1]
        [--value-labels 14]

writes `DIR/png/<index>.png` (1280 x 960 RGBA, as the release), `DIR/json_gt/<index>.json` (the
official task1-task6 JSON, docs/corpora.md §3.3) and `DIR/tables/<index>.txt` (the chart's
table in DePlot's linearized format, `chartjax.data.tables`). Each chart draws everything from
its own `SeedSequence(seed, spawn_key=(index,))`, so the output is byte-identical for a seed
whatever the worker count. `--size`, `--max-categories`, `--max-topics`, `--max-series` (smaller
images, shorter tables, fewer topics and series: for quick learning checks) and `--value-labels`
(each bar's value printed on it, annotated as task-2/3 text with the PMC 2020 role
`value_label`, which the 2019 synthetic release does not use) depart from the release; without
them the output is unchanged. A chart that no style fits (small `--size`, see its help) is
skipped and counted in the printed summary (`skipped`, `skipped_indices`). The charts are
written into `DIR.incomplete-*` beside DIR and moved into DIR when all are done, so a run that
stops half way leaves no partial corpus in DIR.

Annotation conventions follow the ten official samples (`adobe-research/CHART-Synthetic`):
"x-axis" is the independent variable (the vertical axis of horizontal bars and boxes); tick
points sit where the tick meets the plot-box edge; bars are listed category by category;
box-plot strokes are segments with one side 0; pie and donut files annotate task 1 only. Error
bars are drawn (a style option) but not annotated: the 2019 schema has no place for them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import secrets
import shutil
import sys
from collections import Counter
from collections.abc import Sequence

import numpy as np

from chartjax.synth import chart_info_tables as tb
from chartjax.synth.chart_info_geometry import annotate
from chartjax.synth.chart_info_json import dumps, official_json
from chartjax.synth.chart_info_render import Drawn, LayoutError, render
from chartjax.synth.chart_info_style import Style, sample_style
from chartjax.synth.png_encode import DEFAULT_LEVEL, png_bytes

# Styles tried before a chart is skipped. At the release size the first style nearly always fits;
# at 320x240 some charts need over 10 tries, and some (mostly line charts whose tick labels
# overlap) fit none. Raising it changes no chart that fits within fewer tries.
MAX_STYLES = 20


class NoStyleFits(RuntimeError):
    """No style lays chart `index` out in the image; `generate` skips and counts such charts."""


class ChartCounts(Counter):
    """Charts written per chart type; `skipped` holds the indices of charts no style fits."""

    skipped: list[int]


@dataclasses.dataclass(frozen=True)
class Chart:
    chart_type: str
    png: bytes
    doc: dict
    table: str


def parse_types(names: Sequence[str] | None) -> tuple[str, ...]:
    """Official class names, matched case-insensitively; `_`/`-` may stand for spaces."""
    if not names:
        return tb.CHART_TYPES
    lookup = {t.lower(): t for t in tb.CHART_TYPES}
    out = []
    for name in names:
        key = name.replace("_", " ").replace("-", " ").strip().lower()
        if key not in lookup:
            raise ValueError(f"--types: unknown chart type {name!r}; known: {list(tb.CHART_TYPES)}")
        out.append(lookup[key])
    return tuple(dict.fromkeys(out))


def chart_rng(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(entropy=seed, spawn_key=(index,)))


def draw_chart(
    seed: int,
    index: int,
    types: Sequence[str] = tb.CHART_TYPES,
    style_override: dict | None = None,
    max_categories: int | None = None,
    max_topics: int | None = None,
    max_series: int | None = None,
) -> tuple[tb.ChartData, Drawn]:
    """Synthesizes and draws chart `index` of a corpus (tests pass `style_override`; `size` is
    `style_override={"width": w, "height": h}`)."""
    rng = chart_rng(seed, index)
    chart_type = types[int(rng.integers(len(types)))]
    data = tb.synthesize(rng, chart_type, max_categories, max_topics, max_series)
    for _ in range(MAX_STYLES):
        style: Style = sample_style(rng, data)
        if style_override:
            style = dataclasses.replace(style, **style_override)
        try:
            return data, render(data, style)
        except LayoutError as e:
            last = e
    size = f"{style.width}x{style.height}"
    raise NoStyleFits(
        f"chart {index} (seed {seed}, {chart_type}): no style fits {size} in {MAX_STYLES} tries "
        f"(last: {last})"
    )


def encode_png(rgba: np.ndarray, level: int = DEFAULT_LEVEL) -> bytes:
    """8-bit RGBA PNG with the "Up" filter on every row (`png_encode` says why hand-written):
    the Up filter is one vectorized subtraction, and the compressor then meets runs of zeros."""
    h, w, c = rgba.shape
    if c != 4 or rgba.dtype != np.uint8:
        raise ValueError(f"encode_png wants uint8 RGBA, got {rgba.dtype} with {c} channels")
    rows = np.empty((h, w * 4 + 1), np.uint8)
    rows[:, 0] = 2  # filter type Up: each byte minus the one above, modulo 256
    pixels = rows[:, 1:].reshape(h, w, 4)  # a view into `rows`
    pixels[0] = rgba[0]
    np.subtract(rgba[1:], rgba[:-1], out=pixels[1:])  # uint8 arithmetic wraps, as PNG wants
    return png_bytes(rows, w, 4, level)


def _style_override(
    size: tuple[int, int] | None, value_labels: float | None, text_grid: int = 0
) -> dict | None:
    """Style fields set for every chart (no random draws, so the rest of a chart is unchanged)."""
    out = {} if size is None else {"width": int(size[0]), "height": int(size[1])}
    if value_labels:
        out["value_label_size"] = float(value_labels)
    if text_grid:
        out["text_grid"] = int(text_grid)
    return out or None


def make_chart(
    seed: int,
    index: int,
    types: Sequence[str] = tb.CHART_TYPES,
    compress_level: int = DEFAULT_LEVEL,
    size: tuple[int, int] | None = None,
    max_categories: int | None = None,
    max_topics: int | None = None,
    max_series: int | None = None,
    value_labels: float | None = None,
    text_grid: int = 0,
) -> Chart:
    """Chart `index`; `size` (width, height) in pixels replaces the release's 1280 x 960;
    `value_labels` (a point size) prints every bar's value on it; `text_grid` (pixels) puts
    the value and category labels' boxes on that lattice (chart_info_render.snap_texts)."""
    override = _style_override(size, value_labels, text_grid)
    data, drawn = draw_chart(seed, index, types, override, max_categories, max_topics, max_series)
    doc = official_json(data.chart_type, annotate(drawn))
    png = encode_png(drawn.rgba(), compress_level)
    return Chart(data.chart_type, png, doc, data.linearized())


def write_chart(out: str, index: int, chart: Chart) -> str:
    """Writes chart `index`'s PNG, JSON and table under `out`; returns its chart type."""
    stem = str(index)  # the 2019 release names files by integer index (344.png, 21987.json)
    with open(os.path.join(out, "png", stem + ".png"), "wb") as f:
        f.write(chart.png)
    with open(os.path.join(out, "json_gt", stem + ".json"), "w", encoding="utf-8") as f:
        f.write(dumps(chart.doc))
    with open(os.path.join(out, "tables", stem + ".txt"), "w", encoding="utf-8") as f:
        f.write(chart.table)
    return chart.chart_type


def _write_job(job: tuple[str, int, int, dict]) -> tuple[int, str | None]:
    """(index, chart type written), or (index, None) for a chart no style fits."""
    out, seed, index, options = job
    try:
        chart = make_chart(seed, index, **options)
    except NoStyleFits:
        return index, None
    return index, write_chart(out, index, chart)


def generate(
    out: str,
    num: int,
    seed: int = 0,
    workers: int = 1,
    types: Sequence[str] | None = None,
    start: int = 0,
    compress_level: int = DEFAULT_LEVEL,
    size: tuple[int, int] | None = None,
    max_categories: int | None = None,
    max_topics: int | None = None,
    max_series: int | None = None,
    value_labels: float | None = None,
    text_grid: int = 0,
) -> ChartCounts:
    """Writes charts `start .. start+num-1` under `out`; returns the count per chart type.

    The charts are written into a temporary sibling of `out` and moved into `out` once all are
    done, so a run that fails or is killed leaves no partial corpus for a builder to take for a
    whole one. A chart that no style fits (small `size`) is skipped: its index is left out of
    the layout and listed in the result's `skipped`. When no chart fits, nothing is written.
    """
    chart_types = parse_types(types)
    if size is not None and min(size) < 64:
        raise ValueError(f"size: {size} is too small for a chart (at least 64 x 64 pixels)")
    tb.check_caps(max_categories, max_topics, max_series)  # before any folder or worker
    if value_labels is not None and not 0 < value_labels <= 72:
        raise ValueError(f"value_labels: a point size in (0, 72], got {value_labels}")
    if not 0 <= text_grid <= 64:
        raise ValueError(f"text_grid: a lattice side in pixels, 0 (off) to 64, got {text_grid}")
    options = dict(
        types=chart_types,
        compress_level=compress_level,
        size=size,
        max_categories=max_categories,
        max_topics=max_topics,
        max_series=max_series,
        value_labels=value_labels,
        text_grid=text_grid,
    )
    out = os.path.abspath(out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    # Beside `out` (same file system, so the move is a rename); mkdir, unlike mkdtemp, leaves the
    # permissions to the umask, as they were when `out` itself was made.
    tmp = f"{out}.incomplete-{os.getpid()}-{secrets.token_hex(4)}"
    os.mkdir(tmp)
    try:
        for sub in _SUBDIRS:
            os.mkdir(os.path.join(tmp, sub))
        jobs = [(tmp, seed, i, options) for i in range(start, start + num)]
        if workers <= 1:
            results = list(map(_write_job, jobs))
        else:
            # spawn: safe even when the parent has threads (jax, tf); each chart is independent.
            chunk = max(1, min(16, len(jobs) // (4 * workers)))
            with multiprocessing.get_context("spawn").Pool(workers) as pool:
                results = list(pool.imap_unordered(_write_job, jobs, chunksize=chunk))
        counts = ChartCounts(t for _, t in results if t is not None)
        counts.skipped = sorted(i for i, t in results if t is None)
        if num and not counts:
            shape = "the release size" if size is None else f"{size[0]}x{size[1]}"
            raise ValueError(f"no chart fits {shape}: all {num} skipped (see --help for --size)")
        _move_into_place(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return counts


_SUBDIRS = ("png", "json_gt", "tables")


def _move_into_place(tmp: str, out: str) -> None:
    """Renames the finished `tmp` to `out`, or moves its files into an existing `out` (charts
    added to a corpus with `start`, or a folder made beforehand)."""
    try:
        os.rename(tmp, out)  # atomic when `out` does not exist (or is an empty folder)
        return
    except OSError:
        if not os.path.isdir(out):
            raise
    for sub in _SUBDIRS:
        os.makedirs(os.path.join(out, sub), exist_ok=True)
        for name in sorted(os.listdir(os.path.join(tmp, sub))):
            os.replace(os.path.join(tmp, sub, name), os.path.join(out, sub, name))


def parse_size(text: str) -> tuple[int, int]:
    """Parses "640x480" into (640, 480)."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--size: expected WIDTHxHEIGHT, got {text!r}") from None
    if min(w, h) < 64:
        raise argparse.ArgumentTypeError(f"--size: {text!r} is too small (at least 64x64)")
    return w, h


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="output root (png/, json_gt/, tables/)")
    parser.add_argument("--num", type=int, required=True, help="number of charts")
    parser.add_argument("--seed", type=int, default=0, help="same seed, same corpus")
    parser.add_argument("--workers", type=int, default=1, help="rendering processes")
    parser.add_argument("--start", type=int, default=0, help="first chart index (file stem)")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace charts --out already holds"
    )
    parser.add_argument(
        "--types",
        nargs="*",
        default=None,
        help="chart types to draw, e.g. Pie 'Grouped vertical bar' "
        "stacked_horizontal_bar (default: all ten 2019 classes)",
    )
    parser.add_argument(
        "--png-compression",
        type=int,
        default=DEFAULT_LEVEL,
        choices=range(10),
        help="PNG compression level (1-3: zlib-ng, fast; 4-9: zlib, slower; 0: none; "
        f"default {DEFAULT_LEVEL})",
    )
    parser.add_argument(
        "--size",
        type=parse_size,
        default=None,
        help="image size WIDTHxHEIGHT in pixels, e.g. 640x480 (default: the release's 1280x960; "
        "fonts keep their point sizes, so text gets relatively larger). Smaller images skip "
        "the charts that no style fits (seed 0, 4:3): none of 150 at 1280x960, 2 of 300 "
        "at 640x480, about 3%% at 480x360, 15%% at 320x240, 40%% at 256x192, 90%% at 160x120. "
        "A skipped chart's index is left out of the layout and counted in the printed "
        "summary ('skipped'); a size where no chart fits is an error",
    )
    parser.add_argument(
        "--max-categories",
        type=int,
        default=None,
        help="cap on the table rows (categories, scatter points) of every chart (default: none)",
    )
    parser.add_argument(
        "--max-topics",
        type=int,
        default=None,
        help="draw topics (titles, units, value ranges) from the first N built-in ones only "
        "(default: all)",
    )
    parser.add_argument(
        "--max-series",
        type=int,
        default=None,
        help="cap on the series of bar and line charts (1: plain bar charts; default: none)",
    )
    parser.add_argument(
        "--value-labels",
        type=float,
        default=None,
        metavar="POINTS",
        help="print each bar's value on it at this font size, annotated as value_label text "
        "(a PMC 2020 role; the 2019 release prints no values; default: off)",
    )
    parser.add_argument(
        "--text-grid",
        type=int,
        default=0,
        metavar="PIXELS",
        help="move the value and category labels' boxes to the nearest multiple of PIXELS, "
        "e.g. 32 with --size 576x416, which Pix2Struct at 256 patches halves to its 18x13 "
        "grid of 16-px patches: each label is then the same pixels in every patch it lands "
        "in (default: 0, off)",
    )


def check_free(out: str, start: int, num: int) -> None:
    """Refuses to replace charts `out` already holds (as the FigureQA generator refuses a
    non-empty split): adding charts past them with `--start` is fine."""
    taken = [
        i
        for i in range(start, start + num)
        if any(
            os.path.exists(os.path.join(out, sub, f"{i}{ext}"))
            for sub, ext in (("png", ".png"), ("json_gt", ".json"))
        )
    ]
    if taken:
        raise FileExistsError(
            f"{out} already holds {len(taken)} of charts {start}..{start + num - 1} (e.g. "
            f"png/{taken[0]}.png): give a new --out, --start past them to add charts, or "
            "--overwrite to replace them"
        )


def run(args: argparse.Namespace) -> int:
    try:
        types = parse_types(args.types)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    if not args.overwrite:
        check_free(args.out, args.start, args.num)
    counts = generate(
        args.out,
        args.num,
        seed=args.seed,
        workers=args.workers,
        types=types,
        start=args.start,
        compress_level=args.png_compression,
        size=args.size,
        max_categories=args.max_categories,
        max_topics=args.max_topics,
        max_series=args.max_series,
        value_labels=args.value_labels,
        text_grid=args.text_grid,
    )
    summary = {
        "out": os.path.abspath(args.out),
        "charts": dict(sorted(counts.items())),
        # Charts no style fits at this --size: left out of the layout, by index.
        "skipped": len(counts.skipped),
        "skipped_indices": counts.skipped,
    }
    print(json.dumps(summary, indent=1))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="chartjax-synth chart_info",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
