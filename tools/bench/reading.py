"""Reading check (issue 28): does a toy curriculum make the tiny DePlot-style Pix2Struct read
chart VALUES? Stage 1 reads a few numbers and labels drawn large and tables drawn as plain
text (text_snippets and table_pages, 1:1: the toy screenshot parsing), stage 2 reads the same
kind of tables off charts, initialised from stage 1's checkpoint; both through
chartjax.train.train with the package's recipes (gin_configs/tasks/matcha_reading_toy.gin,
matcha_chart_table_toy.gin; docs/pretraining.md).

    python -m chartjax.tools.bench.reading --out runs/bench_reading

The run that reads values, in `make bench`, draws the charts' labels on the patch lattice and
trains stage 2 alone (`--text_grid 32 --stage1_steps 0 ...`: the last section below).

Stage 2's charts are tools/bench/learning.py's "reading values" corpus (its docstring): plain
bar charts of 2-3 bars, each value printed on its bar at 16 pt, 480 x 360, the first 4 topics,
the chart alone as input; the same corpus seeds (seed + 1 training, seed + 2 held-out), vocabulary
and model, so its numbers set against learning.py's from-scratch run (no-title RMS F1 0.043 vs
0.039 for the best constant after 3,000 steps; at the default 1,500 + 100 charts the corpora are
the same). Stage 1's pages (chartjax/synth/table_pages.py) are drawn from the same table
synthesizer, at the same size: 1-3 numbers and maybe a row label one a line, or the title,
header and rows written in columns, at a drawn font size and place; targets the lines, or the
same linearized table. With
`--scratch_control`, stage 2 is also run from scratch with the same steps (the control the
curriculum has to beat; on by default, `--no-scratch_control` skips it).

Reported, held-out (JSON via tools/bench/harness.py, to stdout and `<out>/reading.json`; plot
`<out>/reading.png`):
* stage 1: per evaluation, the held-out snippets' ANLS and exact match and the held-out pages'
  RMS F1, RNSS and exact match;
* stage 2: the learning curve (RMS F1, no-title RMS F1, number-cell exact match) against the
  step and the CPU seconds of this process and its loader workers (sampled every second, read
  at each evaluation's metrics.json write); `reads_values`: the final no-title RMS F1 against the
  best constant table with a paired bootstrap 95% CI of the difference over charts
  (learning.reads_values); `number_cells`: the share of the held-out number cells written
  exactly (matched by row label, else row position, and column), against the best constant
  table's, with its paired bootstrap CI.
Seeds: corpora seed + 1 / seed + 2 (charts), stage-1 pages are the training stream of `--seed`
(held-out pages: matcha.GeneratedSource's eval seed), training and bootstrap `--seed`.

Measured, short exploratory runs only (2 cores shared with 4 other jobs, load 9-10; CPU seconds
of this process and its children). The pipeline runs end to end; stage 1 has not learned to
read in these few hundred steps:

    python -m chartjax.tools.bench.reading --out /tmp/rd/explore --train_charts 300 \
        --heldout_charts 50 --stage1_pages 1000 --stage1_steps 450 --stage2_steps 300 \
        --eval_every 150 --no-scratch_control     # stage 1 on table_pages alone, then

    359 CPU s in all (corpora + vocabulary 23, featurizing 13, stage 1 196, stage 2 126).
    stage 1, 100 held-out pages: RMS F1 0.103 / 0.080 / 0.093 at steps 150 / 300 / 450, exact
    match 0, the same title for 83 of 100 pages at 450 (collapsed; no-title RMS F1 0.004).
    stage 2 from stage 1, 50 held-out charts, 300 steps: RMS F1 0.094, no-title 0.007 vs the best
    constant table's 0.009 (difference -0.002, 95% CI [-0.020, +0.017]); number cells exact
    0.007 vs 0.000 (CI [0.000, +0.020]).

    ... --stage1_pages 800 --stage1_steps 400 --stage2_steps 0 --eval_every 200 --rerun
    (stage 1 as the recipe now has it, text_snippets + table_pages 1:1): 198 CPU s; snippets
    ANLS 0.013 / 0.000 at 200 / 400 (the same 2-3 numbers written for every page), pages RMS F1
    0.066 / 0.077.

The full run (defaults, with the control) is estimated at ~40 CPU minutes from these rates
(~0.42 CPU s a step with evaluations, ~0.06 CPU s a chart generated); it has not been run.

Smaller charts, so that a 16-pt digit spans about two patches at 256 (commit fb3fba3, load 4-6):

    ... --out runs/r240 --size 240x180 --no-scratch_control --eval_every 500

    1,388 CPU s (corpora + vocabulary 253, stage 1 568, stage 2 545). Stage 1 at 1,500 steps:
    snippets ANLS 0.006 (the model writes as many lines as the page has, with the same numbers
    on every page), pages RMS F1 0.159. Stage 2, 100 held-out charts: no-title RMS F1 0.055 /
    0.017 / 0.092 at 500 / 1,000 / 1,500 against the best constant's 0.048 (margin +0.044, 95% CI
    [-0.012, +0.095]: not beyond it), numbers exact 0 against 0; training token accuracy 99% at
    1,500 (8 epochs of the 1,500 charts): it memorizes the training charts instead of reading
    (held-out tables take another topic's header). `--split_digits --stage2_steps 0` (one piece
    per digit): snippets ANLS 0.006 at 500 and 1,000 steps, the same.

Those runs drew stage 1's pages in DejaVu Sans alone, while the charts use four fonts
(chart_info_style.FONTS); the pages now draw from the same four. Why stage 1 stalls is isolated
by bench/reading_probe.py (one number on a blank page): centred, the model reads it within 600
steps, and that does not carry to other places; placed anywhere it plateaus as stage 1 did,
and on 4x smaller pages reaches 13.5% exact after 8,000 steps (its docstring has the figures).

Reading values: the labels on the patch lattice (`make bench`'s line). The probe found the
sub-patch phase to be what costs the budget, so the charts can be drawn without it:
`--text_grid 32` puts the value and category labels' boxes on a 32-pixel lattice of 576 x 416
charts, which Pix2Struct at 256 patches halves to its 18 x 13 grid of 16-pixel patches (no
other resize), so each label string is the same pixels in whichever patches it lands
(chartjax-synth chart_info --text-grid; ticks, title and bars stay where they were). Stage 2
alone, from scratch (`--stage1_steps 0`), 3,000 training and 200 held-out charts, value labels
at 20 pt, one vocabulary piece per digit, 3,000 steps at batch 8; the control is the same
command without `--text_grid` (2 cores, one bench at a time):

    python -m chartjax.tools.bench.reading --out runs/bench_reading_grid --size 576x416 \
        --text_grid 32 --value_labels 20 --stage1_steps 0 --stage2_steps 3000 \
        --train_charts 3000 --heldout_charts 200 --split_digits --eval_every 500

    step                          500    1000   1500   2000   2500   3000
    lattice  no-title RMS F1     0.014  0.035  0.045  0.196  0.252  0.287
             number cells exact  0.000  0.004  0.003  0.007  0.427  0.536
             CPU s                 204    385    564    738    909   1083
    control  no-title RMS F1     0.017  0.039  0.037  0.071  0.063  0.064
             number cells exact  0.000  0.000  0.002  0.000  0.004  0.004
             CPU s                 194    374    555    733    915   1094

    seed 0, at 3,000 steps: on the lattice, no-title RMS F1 0.287 against the best constant
    table's 0.046 (margin +0.242, 95% CI [+0.200, +0.283]) and number cells exact 0.536 against
    0.000 (CI [+0.478, +0.594]): both beyond the CI. The control: 0.064 (CI [-0.013, +0.050])
    and 0.004 (CI [0.000, +0.012]): neither. 1,269 / 1,280 CPU s in all (corpora and
    vocabulary 151 / 155). Seed 1 (`--seed 1`: other corpora, init and order), on the
    lattice: 0.012 / 0.033 / 0.034 / 0.152 / 0.233 / 0.339 no-title RMS F1 and 0.000 / 0.000 /
    0.000 / 0.006 / 0.371 / 0.578 number cells exact at the same steps; at 3,000, 0.339 against
    0.037 (CI [+0.254, +0.351]) and 0.578 against 0 (CI [+0.520, +0.636]); 1,275 CPU s. Row
    labels are read exactly 17% of the time at 3,000 steps (often slanted, in the smaller tick
    font): the keys, not the numbers, hold the RMS F1 down.

So the same model, data and budget read the printed values once the phase is taken away: the
phase, not the model or the step, is what 60 CPU minutes cannot buy (reading at any phase is
the GPU check's question, tools/gpu/checks.py `reading`).
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import os
import shutil
import threading
import time

import numpy as np

from chartjax import checkpoint
from chartjax.tools.bench import corpora, harness, learning, learning_curve

LIBS = learning.LIBS
STAGE1 = "tasks/matcha_reading_toy.gin"
STAGE2 = "tasks/matcha_chart_table_toy.gin"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output folder (corpora, runs, JSON, PNG)")
    p.add_argument(
        "--stage1_steps", type=int, default=1500, help="0: no stage 1 (stage 2 from scratch)"
    )
    p.add_argument("--stage2_steps", type=int, default=1500, help="0: stage 1 alone")
    p.add_argument(
        "--stage1_pages",
        type=int,
        default=2500,
        help="training pages, featurized once (~0.8 MB each)",
    )
    p.add_argument("--eval_every", type=int, default=250)
    p.add_argument("--budget_s", type=float, default=1e9, help="training seconds per stage")
    p.add_argument(
        "--scratch_control",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="stage 2 from scratch too, the same steps (the control the curriculum must beat)",
    )
    p.add_argument("--train_charts", type=int, default=1500)
    p.add_argument("--heldout_charts", type=int, default=100)
    p.add_argument("--size", type=learning.synth_size, default=(480, 360))
    p.add_argument("--value_labels", type=float, default=16.0)
    p.add_argument(
        "--text_grid",
        type=int,
        default=None,
        help="the charts' value and category labels on this pixel lattice (chartjax-synth "
        "chart_info --text-grid), e.g. 32 with --size 576x416 at 256 patches",
    )
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--max_patches", type=int, default=256)
    p.add_argument("--max_target_len", type=int, default=96)
    p.add_argument("--vocab_size", type=int, default=1024)
    p.add_argument("--split_digits", action="store_true", help="one vocabulary piece per digit")
    p.add_argument("--emb_dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--workers", type=int, default=2, help="chart rendering processes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rerun", action="store_true", help="replace earlier runs in --out")
    args = p.parse_args(argv)
    if not (args.stage1_steps or args.stage2_steps):
        p.error("--stage1_steps and --stage2_steps are both 0: nothing to train")
    return args


# ------------------------------------------------------------------ CPU clock -------------


class CpuClock:
    """(wall time, CPU seconds of this process and its live children) every `period` s, so a
    file written at wall time t can be given the CPU seconds spent by then."""

    def __init__(self, period: float = 1.0):
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(period,), daemon=True)

    def _run(self, period):
        while not self._stop.is_set():
            self.samples.append((time.time(), harness.tree_cpu_seconds()))
            self._stop.wait(period)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.samples.append((time.time(), harness.tree_cpu_seconds()))

    def at(self, wall: float) -> float:
        """CPU seconds since the clock started, at wall time `wall` (interpolated)."""
        t, c = np.array(self.samples).T
        return float(np.interp(wall, t, c) - c[0])


def eval_cpu_s(workdir: str, split: str, clock: CpuClock) -> dict[int, float]:
    out = {}
    for path in glob.glob(os.path.join(workdir, "eval", split, "step_*", "metrics.json")):
        with open(path) as f:
            out[json.load(f)["step"]] = clock.at(os.path.getmtime(path))
    return out


# ------------------------------------------------------------------ number cells ----------


def _number(cell: str) -> bool:
    try:
        float(cell)
        return True
    except ValueError:
        return False


def number_cells_exact(prediction: str, target: str) -> tuple[int, int]:
    """(number cells of the target written exactly, number cells of the target): the predicted
    row with the target row's label (else the row at its position), the same column."""
    from chartjax.data import tables

    want, got = tables.parse(target), tables.parse(prediction)
    by_label = {r[0]: r for r in got.rows if r}
    hits = total = 0
    for k, row in enumerate(want.rows):
        pred = by_label.get(row[0]) or (got.rows[k] if k < len(got.rows) else ())
        for j, cell in enumerate(row[1:], start=1):
            if _number(cell):
                total += 1
                hits += j < len(pred) and pred[j].strip() == cell.strip()
    return hits, total


def number_cell_rates(predictions: list[str], targets: list[str]) -> np.ndarray:
    """Per chart: the share of its number cells written exactly (charts without any: 0)."""
    pairs = [number_cells_exact(p, t) for p, t in zip(predictions, targets)]
    return np.array([h / n if n else 0.0 for h, n in pairs])


def number_cells(workdir: str, step: int, baselines: dict, seed: int) -> dict:
    """Step `step`'s number-cell exact match against the best constant table's (chosen on the
    held-out charts themselves, which favours the constant), paired bootstrap over charts."""
    rows = learning_curve.read_predictions(workdir, step)
    targets = [r["target"] for r in rows]
    model = number_cell_rates([r["prediction"] for r in rows], targets)
    consts = {
        name: number_cell_rates([b["prediction"]] * len(rows), targets)
        for name, b in baselines.items()
    }
    name = max(consts, key=lambda k: consts[k].mean())
    boot = learning_curve.paired_bootstrap(model, consts[name], seed)
    return {
        "exact": float(model.mean()),
        "best_constant": name,
        "best_constant_exact": float(consts[name].mean()),
        "margin": boot["mean"],
        "margin_ci95": boot["ci95"],
        "beats_constant": boot["ci95"][0] > 0,
    }


# ------------------------------------------------------------------ stages ----------------


def bindings(args, vocab_file: str, vocab_size: int, data_dir: str, steps: int) -> list[str]:
    return [
        f"VOCAB = '{vocab_file}'",
        f"DATA_DIR = '{data_dir}'",
        *learning.model_bindings(args, vocab_size),
        f"Features.max_patches = {args.max_patches}",
        f"Features.max_target_len = {args.max_target_len}",
        f"Decoding.max_decode_len = {args.max_target_len}",
        f"matcha_task.page_size = {tuple(args.size)}",
        f"schedule.peak = {args.lr}",
        f"train.global_batch_size = {args.batch}",
        f"train.eval_batch_size = {learning.eval_batch()}",
        f"train.num_train_steps = {steps}",
        f"train.eval_every = {args.eval_every}",
        f"train.checkpoint_every = {steps}",
        "train.progress = False",
        f"train.seed = {args.seed}",
    ]


def stage1_task(args, n_pages: int):
    """The recipe's mixture task, training on its first `n_pages` pages featurized once."""
    from chartjax.data import feature_cache
    from chartjax.tasks import catalog

    task = catalog.get_task("matcha")
    records = itertools.islice(
        task.source.train_examples(
            seed=args.seed, start_step=0, local_batch_size=1, process_index=0, process_count=1
        ),
        n_pages,
    )
    featurize = task.features(False)
    rows = [featurize(r) for r in records]
    feats = {k: np.stack([r[k] for r in rows]) for k in learning.MODEL_INPUTS}
    return feature_cache.replay_task(task, feats, learning.eval_batch())


def stage2_task(args, out: str, vocab_file: str):
    """The recipe's deplot task on the generated charts: trains on all of the training build
    (features cached under `<out>/features/`), evaluates the held-out build."""
    from chartjax.data import feature_cache, pipeline
    from chartjax.tasks import deplot, seq2seq

    features = seq2seq.Features()
    splits = {"train_split": "train", "eval_splits": ("train",), "prompt": ""}
    train_task = deplot.make_task(
        data_dir=os.path.join(out, "tfds_train"), features=features, **splits
    )
    eval_task = deplot.make_task(
        data_dir=os.path.join(out, "tfds_heldout"), features=features, **splits
    )
    with open(os.path.join(out, "tfds_train", "corpus.json"), "rb") as f:
        stamp = f.read()
    with open(os.path.splitext(vocab_file)[0] + ".vocab", "rb") as f:
        key = feature_cache.cache_key(
            stamp, f.read(), args.max_patches, args.max_target_len, "prompt="
        )
    feats = feature_cache.cached_features(
        lambda: pipeline.eval_batches(train_task, "train", args.batch, 0, 1),
        learning.MODEL_INPUTS,
        os.path.join(out, "features", key),
    )
    return feature_cache.replay_task(eval_task, feats, learning.eval_batch())


def train_stage(workdir: str, task, args, rerun: bool) -> tuple[dict, CpuClock]:
    from chartjax import train as train_lib

    if os.path.exists(workdir) and os.listdir(workdir):
        if not rerun:
            raise FileExistsError(f"{workdir} exists: pass --rerun to replace it")
        shutil.rmtree(workdir)
    with CpuClock() as clock:
        result = train_lib.train(workdir, task=task, max_train_time_s=args.budget_s)
    return result, clock


def stage1_curve(workdir: str, clock: CpuClock) -> list[dict]:
    """Per evaluated step, each stage-1 split's scores (pages: RMS F1, RNSS and exact match;
    snippets: ANLS and exact match)."""
    points: dict[int, dict] = {}
    for split in sorted(os.listdir(os.path.join(workdir, "eval"))):
        cpu = eval_cpu_s(workdir, split, clock)
        for path in glob.glob(os.path.join(workdir, "eval", split, "step_*", "metrics.json")):
            with open(path) as f:
                obj = json.load(f)
            point = points.setdefault(obj["step"], {"step": obj["step"]})
            point["cpu_s"] = max(point.get("cpu_s", 0.0), cpu[obj["step"]])
            point[split] = {
                k: v
                for k, v in obj["metrics"].items()
                if k in ("rms_f1", "rnss", "exact_match", "anls")
            }
    return [points[s] for s in sorted(points)]


def stage2_curve(workdir: str, clock: CpuClock) -> list[dict]:
    cpu = eval_cpu_s(workdir, "train", clock)
    curve = learning_curve.read_curve(workdir)
    for point in curve:
        rows = learning_curve.read_predictions(workdir, point["step"])
        preds, targets = [r["prediction"] for r in rows], [r["target"] for r in rows]
        point["number_cells_exact"] = float(number_cell_rates(preds, targets).mean())
        point["cpu_s"] = cpu.get(point["step"])
    return curve


def stage2_summary(out: str, raw_train: str, curves2: dict, results2: dict, seed: int) -> dict:
    """Stage 2's runs against the constant tables (chosen on training tables; the best of them
    on the held-out charts is the one each run is set against)."""
    first = next(iter(curves2))
    last = curves2[first][-1]["step"]
    w2 = os.path.join(out, f"stage2_{first}")
    targets = [r["target"] for r in learning_curve.read_predictions(w2, last)]
    baselines = learning_curve.constant_baselines(raw_train, targets, seed)
    const = {
        "rms_f1_no_title": max(b["rms_f1_no_title"] for b in baselines.values()),
        "number_cells_exact": max(
            float(number_cell_rates([b["prediction"]] * len(targets), targets).mean())
            for b in baselines.values()
        ),
    }
    stage2 = {}
    for name, curve in curves2.items():
        workdir, step = os.path.join(out, f"stage2_{name}"), curve[-1]["step"]
        stage2[name] = {
            "curve": curve,
            "steps": results2[name]["step"],
            "reads_values": learning.reads_values(workdir, step, baselines, seed),
            "number_cells": number_cells(workdir, step, baselines, seed),
        }
    return {
        "stage2": stage2,
        "constant_baselines": baselines,
        "best_constant": const,
        "heldout_charts": len(targets),
    }


def plot(stage1: list[dict], stages2: dict[str, list[dict]], const: dict | None, png: str) -> None:
    """Held-out reading against CPU seconds: stage 1's page RMS F1, stage 2's no-title RMS F1
    and number-cell exact match (with the best constant tables' as dashed lines)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 3 if stage1 else 2  # no stage 1 (--stage1_steps 0): stage 2's panels alone
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4))
    if stage1:
        cpu1 = [p["cpu_s"] for p in stage1]
        for split, key in (("table_pages", "rms_f1"), ("text_snippets", "anls")):
            if split in stage1[0]:
                axes[0].plot(cpu1, [p[split][key] for p in stage1], "o-", label=f"{split} {key}")
        axes[0].set(title="stage 1: held-out text", xlabel="CPU s")
        axes[0].legend()
    rms_ax, num_ax = axes[-2:]
    for name, curve in stages2.items():
        cpu = [p["cpu_s"] for p in curve]
        rms_ax.plot(cpu, [p["rms_f1_no_title"] for p in curve], "o-", label=name)
        num_ax.plot(cpu, [p["number_cells_exact"] for p in curve], "o-", label=name)
    if const:
        rms_ax.axhline(const["rms_f1_no_title"], ls="--", c="gray", label="best constant")
        num_ax.axhline(const["number_cells_exact"], ls="--", c="gray", label="best constant")
    rms_ax.set(
        title="stage 2: held-out charts", xlabel="CPU s (this stage)", ylabel="RMS F1, no title"
    )
    num_ax.set(title="stage 2: number cells", xlabel="CPU s (this stage)", ylabel="exact match")
    if const:
        rms_ax.legend()
        num_ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


def run(args) -> dict:
    import gin
    import jax

    from chartjax import config as config_lib
    from chartjax.data.vocab import Vocabulary

    bench = harness.Run("reading", vars(args), LIBS)
    cpu0, t_start = harness.cpu_seconds(), time.time()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", os.path.join(out, "jax_cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    phases, cpu = {}, {}
    t, c = time.time(), harness.tree_cpu_seconds()
    corpus = {
        "types": ["Grouped vertical bar"],
        "workers": args.workers,
        "size": args.size,
        "max_categories": 3,
        "max_topics": 4,
        "max_series": 1,
        "value_labels": args.value_labels,
        "text_grid": args.text_grid,
    }
    raw_train = os.path.join(out, "raw_train")
    corpora.chart_info(
        raw_train, os.path.join(out, "tfds_train"), args.train_charts, args.seed + 1, **corpus
    )
    corpora.chart_info(
        os.path.join(out, "raw_heldout"),
        os.path.join(out, "tfds_heldout"),
        args.heldout_charts,
        args.seed + 2,
        **corpus,
    )
    vocab_file = learning.train_vocab(
        raw_train, os.path.join(out, "vocab", "spm"), args.vocab_size, args.split_digits
    )
    vocab_size = Vocabulary(vocab_file).vocab_size
    phases["corpora_vocab_s"], cpu["corpora_vocab_s"] = (
        time.time() - t,
        harness.cpu_seconds() - cpu0,
    )

    def stage(recipe, steps, files=(), extra=()):
        gin.clear_config()
        data_dir = os.path.join(out, "tfds_train")
        config_lib.parse_gin(
            [recipe, *files], bindings(args, vocab_file, vocab_size, data_dir, steps) + list(extra)
        )

    # Stage 1: tables drawn as text (0 steps: none, and stage 2 from scratch alone).
    curve1, result1, runs = [], {"step": 0}, {}
    if args.stage1_steps:
        t, c = time.time(), harness.cpu_seconds()
        stage(STAGE1, args.stage1_steps)
        task1 = stage1_task(args, args.stage1_pages)
        phases["stage1_featurize_s"] = time.time() - t
        cpu["stage1_featurize_s"] = harness.cpu_seconds() - c
        w1 = os.path.join(out, "stage1")
        t, c = time.time(), harness.cpu_seconds()
        result1, clock1 = train_stage(w1, task1, args, args.rerun)
        phases["stage1_train_s"] = time.time() - t
        cpu["stage1_train_s"] = harness.cpu_seconds() - c
        gin.clear_config()
        del task1  # its features (~0.8 MB a page) before stage 2's
        curve1 = stage1_curve(w1, clock1)
        last = os.path.join(w1, "checkpoints", str(checkpoint.latest_step(w1)))
        runs["from_stage1"] = ((), [f"INIT_PATH = '{last}'"])

    # Stage 2: charts, from stage 1's checkpoint (and from scratch: the control).
    if args.scratch_control or not args.stage1_steps:
        runs["from_scratch"] = (["init/random.gin"], [])
    curves2, results2 = {}, {}
    for name, (files, extra) in runs.items() if args.stage2_steps else ():
        t, c = time.time(), harness.cpu_seconds()
        stage(STAGE2, args.stage2_steps, files, extra)
        task2 = stage2_task(args, out, vocab_file)
        w2 = os.path.join(out, f"stage2_{name}")
        results2[name], clock2 = train_stage(w2, task2, args, args.rerun)
        gin.clear_config()
        curves2[name] = stage2_curve(w2, clock2)
        phases[f"stage2_{name}_s"] = time.time() - t
        cpu[f"stage2_{name}_s"] = harness.cpu_seconds() - c

    summary = {
        "stage1": {"curve": curve1, "steps": result1["step"], "pages": args.stage1_pages},
        "settings": {"vocab_pieces": vocab_size},
    }
    const = None
    if curves2:
        summary.update(stage2_summary(out, raw_train, curves2, results2, args.seed))
        const = summary["best_constant"]
    summary["wall_s"] = {**phases, "total_s": time.time() - t_start}
    summary["cpu_s"] = {**cpu, "total_s": harness.cpu_seconds() - cpu0}
    plot(curve1, curves2, const, os.path.join(out, "reading.png"))
    return harness.emit(bench.report(summary), os.path.join(out, "reading.json"))


def main(argv=None) -> int:
    run(parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
