"""Learning check: a tiny DePlot-style Pix2Struct, trained on CPU for a bounded time on generated
CHART-Info charts, improves RMS F1 (and RNSS) on held-out generated charts over step 0.

    python -m tools.bench_learning --budget_s 600 --train_charts 400 --out runs/bench_learning

What it runs (all chartjax parts, nothing benchmark-specific in the model or the loop):
1. `chartjax-synth chart_info` writes the training and the held-out charts (different seeds;
   `--types`, default the vertical bar types: their tables are the shortest with a header);
2. the chart_info TFDS builder (synthetic_2019) builds each folder into its own data_dir;
3. tools/train_vocab trains a small SentencePiece vocabulary on the training tables only;
4. the `deplot` task (chart_info source: tables derived from the task-6 data series, prompt
   rendered as a header, Pix2Struct patches) featurizes the training charts once, and the
   held-out charts once; training replays those features (rendering a 1280 x 960 chart and its
   header costs ~0.2 s, which would otherwise compete with the 2 training cores every step);
5. the held-out charts are scored with the initial parameters (step 0), then
   chartjax.train.train runs the jitted loop for `--budget_s` seconds (after compilation),
   evaluating every `--eval_every` steps and at the end.
Writes `<out>/learning.json` (settings, the curve of held-out RMS precision/recall/F1 and RNSS
against step and time, phase wall times) and `<out>/learning.png`, and prints the JSON.
"Improved" means the final held-out RMS F1 is above its step-0 value. For scale, the JSON also
holds `constant_table_baseline`: one fixed training table predicted for every held-out chart.

Measured (2 CPU cores shared with other jobs, defaults, 400 training charts, 730 steps in
600 s): held-out RMS F1 0 at step 0, 0.010-0.013 at steps 200-400, 0.002 at the end (train
loss 0.24: the 400 tables are being memorized); RNSS 0 -> 0.59. A constant training table
scores RMS F1 0.009 and RNSS 0.70 on the same charts: in this budget the model learns the
table format and typical values, not to read values off the chart (RMS F1 on 40 charts moves
by ~0.005 with a single title match, so the curve is noisy).

GPU run (the issue's second learning check; no device was lent when this was written, and the
lent GPU machines have neither TensorFlow nor gin, so it needs a full chartjax environment):
the Relation Network on a generated FigureQA corpus of the paper's size (100,000 training
images; the paper's RN scores 72.40 on the alternated-colour test set):

    chartjax-synth figureqa --out ~/raw/figureqa_gen --train-images 100000 \\
        --val-images 20000 --test-images 20000 --workers 16
    tfds build tfds_builders/figureqa --manual_dir=~/raw/figureqa_gen
    chartjax-train --gin_file=tasks/figureqa_rn.gin --workdir=runs/rn_gen \\
        --gin_bindings="train.mesh_shape=(-1, 1)"
    chartjax-eval --gin_file=tasks/figureqa_rn.gin --workdir=runs/rn_gen --split=validation2

(validation2 uses the alternated colour scheme, as the paper's test2; its accuracy in
`runs/rn_gen/eval/validation2/step_*/metrics.json` is the number to set against 72.40.)
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import shutil
import time

import numpy as np

DEFAULT_TYPES = ("Grouped vertical bar", "Stacked vertical bar")
EVAL_BATCH = 40
MODEL_INPUTS = ("encoder_input_tokens", "decoder_input_tokens", "decoder_target_tokens")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output folder (corpora, run, JSON, PNG)")
    p.add_argument("--budget_s", type=float, default=600.0,
                   help="training wall-clock budget in seconds (after compilation)")
    p.add_argument("--train_charts", type=int, default=400)
    p.add_argument("--heldout_charts", type=int, default=40)
    p.add_argument("--types", nargs="+", default=list(DEFAULT_TYPES),
                   help="chart types of both corpora (chartjax-synth chart_info --types)")
    p.add_argument("--eval_every", type=int, default=100)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-2, help="peak learning rate (Adafactor)")
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--max_patches", type=int, default=256)
    p.add_argument("--max_target_len", type=int, default=128)
    p.add_argument("--vocab_size", type=int, default=1024)
    p.add_argument("--emb_dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=2, help="encoder and decoder layers each")
    p.add_argument("--workers", type=int, default=2, help="chart rendering processes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rerun", action="store_true",
                   help="replace an earlier training run in --out (its corpora are reused)")
    return p.parse_args(argv)


# ------------------------------------------------------------------ corpora --------------


def make_corpus(raw: str, data_dir: str, num: int, seed: int, types, workers: int) -> str:
    """Generates `num` charts into `raw` and builds them; reuses an earlier identical build."""
    import tensorflow_datasets as tfds

    from chartjax.data import pipeline
    from chartjax.synth import chart_info as synth
    from tfds_builders.chart_info import chart_info as builder_mod

    stamp = os.path.join(data_dir, "corpus.json")
    want = {"num": num, "seed": seed, "types": list(types)}
    if os.path.exists(stamp):
        with open(stamp) as f:
            if json.load(f) == want:
                return pipeline.tfds_builder_dir("chart_info/synthetic_2019", data_dir)
    for d in (raw, data_dir):
        if os.path.exists(d) and os.listdir(d):
            raise FileExistsError(f"{d} holds another corpus: remove it or choose another --out")
    synth.generate(raw, num, seed=seed, workers=workers, types=types)
    builder = builder_mod.Builder(data_dir=data_dir, config="synthetic_2019")
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=raw))
    with open(stamp, "w") as f:
        json.dump(want, f)
    return pipeline.tfds_builder_dir("chart_info/synthetic_2019", data_dir)


def train_vocab(raw: str, out_prefix: str, vocab_size: int) -> str:
    from chartjax.tasks import deplot
    from tools import train_vocab as tv

    texts = [deplot.PROMPT]
    for path in sorted(glob.glob(os.path.join(raw, "tables", "*.txt"))):
        with open(path, encoding="utf-8") as f:
            texts.append(f.read())
    return tv.train(texts, out_prefix, vocab_size=vocab_size, hard_vocab_limit=False)


# ------------------------------------------------------------------ cached task ----------


def featurize_all(task, split: str, batch: int) -> dict[str, np.ndarray]:
    """Every record of `split` through the task's own eval pipeline, padding dropped."""
    cols: dict[str, list] = {}
    for b in task.eval_batches(split, batch, 0, 1):
        keep = np.asarray(b["_mask"], bool)
        for k, v in b.items():
            cols.setdefault(k, []).append(np.asarray(v)[keep])
    return {k: np.concatenate(v) for k, v in cols.items()}


def cached_task(train_task, eval_task, batch: int):
    """`eval_task` (held-out data) training on `train_task`'s features, computed once and
    replayed in a seeded, resumable order; the held-out batches are computed once too."""
    train_feats = featurize_all(train_task, "train", batch)
    train_feats = {k: train_feats[k] for k in MODEL_INPUTS}
    n = len(train_feats["decoder_target_tokens"])
    eval_cache: dict[str, list] = {}

    def train_batches(global_batch_size, seed, start_step, process_index, process_count):
        if process_count != 1:
            raise ValueError("bench_learning runs on one process")
        step = start_step
        while True:
            pos = np.arange(step * global_batch_size, (step + 1) * global_batch_size)
            idx = np.array([np.random.default_rng([seed, int(p // n)]).permutation(n)[p % n]
                            for p in pos])
            yield {k: v[idx] for k, v in train_feats.items()}
            step += 1

    def eval_batches(split, global_batch_size, process_index, process_count):
        if split not in eval_cache:
            eval_cache[split] = list(eval_task.eval_batches(split, global_batch_size,
                                                            process_index, process_count))
        yield from eval_cache[split]

    task = dataclasses.replace(eval_task, train_batches=train_batches,
                               eval_batches=eval_batches)
    return task, n


# ------------------------------------------------------------------ run -----------------


def gin_bindings(args, vocab_file: str, vocab_size: int) -> list[str]:
    heads = max(args.emb_dim // 32, 1)
    return [
        f"Pix2StructConfig.vocab_size = {vocab_size}",
        f"Pix2StructConfig.emb_dim = {args.emb_dim}", f"Pix2StructConfig.num_heads = {heads}",
        f"Pix2StructConfig.head_dim = {args.emb_dim // heads}",
        f"Pix2StructConfig.mlp_dim = {args.emb_dim * 2}",
        f"Pix2StructConfig.num_encoder_layers = {args.layers}",
        f"Pix2StructConfig.num_decoder_layers = {args.layers}",
        "Pix2StructConfig.dtype = 'float32'",
        f"Features.vocab_file = '{vocab_file}'", f"Features.max_patches = {args.max_patches}",
        f"Features.max_target_len = {args.max_target_len}",
        f"Decoding.max_decode_len = {args.max_target_len}",
        "make_optimizer.name = 'adafactor'", "schedule.kind = 'constant'",
        f"schedule.peak = {args.lr}", f"schedule.warmup_steps = {args.warmup}",
        f"train.global_batch_size = {args.batch}", f"train.eval_batch_size = {EVAL_BATCH}",
        "train.progress = False", "train.log_every = 10", "train.checkpoint_every = 100000",
        "train.keep_checkpoints = 1", f"train.seed = {args.seed}",
    ]  # fmt: skip


def constant_baseline(raw: str, heldout_targets: list[str], seed: int) -> dict:
    """Held-out scores of one fixed training table predicted for every chart (picked, among 40
    training tables, as the best mean RMS F1 against 80 others): what format and typical
    values alone earn, without reading the chart."""
    from chartjax.metrics import tables as table_metrics

    train = []
    for path in sorted(glob.glob(os.path.join(raw, "tables", "*.txt"))):
        with open(path, encoding="utf-8") as f:
            train.append(f.read())
    rng = np.random.default_rng(seed)
    cands = rng.choice(len(train), min(40, len(train)), replace=False)
    refs = rng.choice(len(train), min(80, len(train)), replace=False)

    def fit(c):
        return np.mean([table_metrics.rms_example([train[r]], train[c])[2] for r in refs
                        if r != c])

    best = train[max(cands, key=fit)]
    preds = [best] * len(heldout_targets)
    return {"rms_f1": table_metrics.rms(preds, heldout_targets).metrics["rms_f1"],
            "rnss": table_metrics.rnss(preds, heldout_targets).metrics["rnss"]}


def eval_step0(task, workdir: str, seed: int) -> dict:
    """The held-out scores of the initial parameters: the state `train` starts from (same
    model, optimizer and seed), evaluated as its periodic evaluations are."""
    from chartjax import evaluate as eval_lib
    from chartjax import mesh as mesh_lib
    from chartjax import optim
    from chartjax import state as state_lib
    from chartjax.models.configurables import build_model

    mesh, rules = mesh_lib.make_mesh((-1, 1)), mesh_lib.axis_rules("data_parallel")
    tx, _ = optim.make_optimizer()
    spec, init_fn = state_lib.create(build_model, tx, mesh, rules, seed)
    with mesh_lib.activate(mesh, rules):
        return eval_lib.evaluate_split(task, spec.model_def, init_fn(), mesh, rules,
                                       split="train", step=0, global_batch_size=EVAL_BATCH,
                                       out_dir=os.path.join(workdir, "eval"))


def read_losses(workdir: str) -> dict[int, dict]:
    """train_metrics.jsonl rows by step."""
    losses = {}
    path = os.path.join(workdir, "train_metrics.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                losses[row["step"]] = row
    return losses


def read_curve(workdir: str) -> list[dict]:
    losses = read_losses(workdir)
    curve = []
    for path in glob.glob(os.path.join(workdir, "eval", "train", "step_*", "metrics.json")):
        with open(path) as f:
            obj = json.load(f)
        point = {"step": obj["step"],
                 **{k: obj["metrics"][k] for k in ("rms_precision", "rms_recall", "rms_f1",
                                                   "rnss")}}  # fmt: skip
        logged = losses.get(obj["step"])
        if logged:
            point.update(train_loss=logged["loss"], elapsed_s=logged["elapsed_s"])
        curve.append(point)
    return sorted(curve, key=lambda p: p["step"])


def plot(curve: list[dict], losses: list[list[float]], baseline: dict, png: str,
         title: str) -> None:
    """RMS F1 (own scale: it stays small), RNSS, and the training loss against the step.
    (RMS precision is 1 for a prediction without datapoints, DePlot's rule: not plotted.)"""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    steps = [p["step"] for p in curve]
    ax[0].plot(steps, [p["rms_f1"] for p in curve], marker="o", color="C0", label="model")
    ax[0].set(xlabel="step", ylabel="held-out RMS F1", title=title)
    ax[1].plot(steps, [p["rnss"] for p in curve], marker="o", color="C3", label="model")
    ax[1].set(xlabel="step", ylabel="held-out RNSS", ylim=(0, 1))
    for a, key in ((ax[0], "rms_f1"), (ax[1], "rnss")):
        a.axhline(baseline[key], color="grey", linestyle="--", label="constant table")
        a.legend(loc="lower right")
    ax[2].plot([s for s, _ in losses], [v for _, v in losses], marker=".")
    ax[2].set(xlabel="step", ylabel="train loss (mean per target token)")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


def run(args) -> dict:
    import gin
    import jax

    from chartjax import config as config_lib
    from chartjax import train as train_lib
    from chartjax.tasks import deplot, seq2seq

    t_start = time.time()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    # The step-0 evaluation and the loop compile the same decoding step: compile it once.
    jax.config.update("jax_compilation_cache_dir", os.path.join(out, "jax_cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    phases = {}
    t = time.time()
    make_corpus(os.path.join(out, "raw_train"), os.path.join(out, "tfds_train"),
                            args.train_charts, args.seed + 1, args.types, args.workers)
    heldout_dir = make_corpus(os.path.join(out, "raw_heldout"), os.path.join(out, "tfds_heldout"),
                              args.heldout_charts, args.seed + 2, args.types, args.workers)
    phases["corpora_s"] = time.time() - t
    t = time.time()
    vocab_file = train_vocab(os.path.join(out, "raw_train"), os.path.join(out, "vocab", "spm"),
                             args.vocab_size)
    from chartjax.data.vocab import Vocabulary

    vocab_size = Vocabulary(vocab_file).vocab_size
    phases["vocab_s"] = time.time() - t

    gin.clear_config()
    config_lib.parse_gin(["models/pix2struct.gin", "hardware/cpu.gin"],
                         gin_bindings(args, vocab_file, vocab_size))
    t = time.time()
    features = seq2seq.Features()
    splits = {"train_split": "train", "eval_splits": ("train",)}
    train_task = deplot.make_task(data_dir=os.path.join(out, "tfds_train"), features=features,
                                  **splits)
    eval_task = deplot.make_task(data_dir=os.path.join(out, "tfds_heldout"), features=features,
                                 **splits)
    task, num_train_records = cached_task(train_task, eval_task, args.batch)
    phases["featurize_s"] = time.time() - t
    workdir = os.path.join(out, "run")
    if os.path.exists(workdir) and os.listdir(workdir):
        if not args.rerun:
            raise FileExistsError(f"{workdir} exists: pass --rerun to replace that run")
        shutil.rmtree(workdir)
    t = time.time()
    eval_step0(task, workdir, args.seed)
    phases["step0_eval_s"] = time.time() - t
    t = time.time()
    result = train_lib.train(workdir, task=task, num_train_steps=10**9,
                             max_train_time_s=args.budget_s, eval_every=args.eval_every)
    phases["train_s"] = time.time() - t
    gin.clear_config()

    curve = read_curve(workdir)
    losses = [[s, row["loss"]] for s, row in sorted(read_losses(workdir).items())]
    first, last = curve[0], curve[-1]
    heldout_targets = [r["target"] for r in seq2seq.iter_records(
        heldout_dir, "train", lambda ex: [r for r in [deplot.chart_info_record(ex)] if r],
        deplot.CHART_INFO_KEYS)]
    summary = {
        "benchmark": "bench_learning",
        "improved": last["rms_f1"] > first["rms_f1"],
        "step0": first, "final": last, "best": max(curve, key=lambda p: p["rms_f1"]),
        "curve": curve, "train_loss": losses,
        "constant_table_baseline": constant_baseline(os.path.join(out, "raw_train"),
                                                     heldout_targets, args.seed),
        "steps": result["step"], "stop_reason": result["stop_reason"],
        "examples_per_s": result["train"].get("examples_per_s"),
        "wall_s": {**phases, "total_s": time.time() - t_start},
        "settings": {**{k: v for k, v in vars(args).items()}, "vocab_pieces": vocab_size,
                     "train_records": num_train_records,
                     "heldout_records": len(heldout_targets),
                     "heldout_target_tokens_max": max(
                         len(Vocabulary(vocab_file).encode(t)) for t in heldout_targets),
                     "model": "Pix2Struct (chartjax.models.pix2struct), float32, Adafactor"},
    }  # fmt: skip
    with open(os.path.join(out, "learning.json"), "w") as f:
        json.dump(summary, f, indent=1)
    plot(curve, losses, summary["constant_table_baseline"], os.path.join(out, "learning.png"),
         f"held-out ({len(heldout_targets)} charts), {args.budget_s:.0f} s CPU budget")
    return summary


def main(argv=None) -> int:
    summary = run(parse_args(argv))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
