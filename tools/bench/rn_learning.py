"""How fast does the FigureQA Relation Network leave chance? A learning-curve probe (JSON).

    python -m chartjax.tools.bench.rn_learning --data_dir demo_out/tfds --steps 2000 \
        [--types vbar_categorical,pie] [--templates 0,1] [--limit 256] [--out rn.json]
    python -m chartjax.tools.bench.rn_learning --images 400 --steps 500   # generates a corpus

`make demo` trains the RN for a few hundred CPU steps, and it stays at 50%. This probe asks
whether any CPU-sized setting does better: it reads a built FigureQA TFDS data_dir (the demo's
or any other; without `--data_dir`, a corpus of `--images` train1 images and a quarter as many
per validation split is generated and built into a temporary folder) through the figureqa task's own preprocessing, holds the chosen subset in memory
(figure types, templates, the first `--limit` questions) and trains the RN with Adam on it,
logging the training loss/accuracy every 100 steps and validation1/validation2 accuracy (and
the share of "yes" predictions: 0 or 100 means a single-class model) every `--eval_every` to
stderr; the harness's JSON object (with the whole curve) goes to stdout and `--out`.
`--limit 256` is the memorization check: the loss must reach ~0, or gradients do not flow.

The loop is a plain `nnx.jit` step on one device, not chartjax.train: this measures learning
dynamics on fixed data, not the sharded loop (tests/test_train_*.py cover that). Measured numbers are in
issue #2's closing note.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from chartjax.data import pipeline
from chartjax.tools.bench import corpora, figureqa_sanity, harness

INPUTS = figureqa_sanity.INPUTS
EVAL_BATCH = 256


def load_split(task, split: str, types, templates, limit: int) -> dict[str, np.ndarray]:
    """The split's questions after the task's eval preprocessing, filtered, padding dropped."""
    from chartjax.data import feature_cache

    d = feature_cache.featurize(pipeline.eval_batches(task, split, EVAL_BATCH, 0, 1))
    d = {k: d[k] for k in (*INPUTS, "label", "figure_type", "question_id")}
    d["figure_type"] = np.array(
        [x.decode() if isinstance(x, bytes) else str(x) for x in d["figure_type"]]
    )
    m = np.ones(len(d["label"]), bool)
    if types:
        m &= np.isin(d["figure_type"], types)
    if templates:
        m &= np.isin(d["question_id"], templates)
    d = {k: v[m] for k, v in d.items()}
    return {k: v[:limit] for k, v in d.items()} if limit else d


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data_dir", help="TFDS data_dir holding a figureqa build")
    p.add_argument("--images", type=int, default=400, help="train1 images when generating")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--conv-layers", type=int, default=4)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--g-dim", type=int, default=256, help="g and f widths")
    p.add_argument("--lstm-dim", type=int, default=256)
    p.add_argument("--types", default="", help="comma-separated figure types (default all)")
    p.add_argument("--templates", default="", help="comma-separated template ids 0-14")
    p.add_argument("--limit", type=int, default=0, help="keep the first N training questions")
    p.add_argument("--eval_every", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    harness.add_out_flag(p)
    a = p.parse_args(argv)
    run = harness.Run("rn_learning", vars(a), ("jax", "flax", "optax", "tensorflow-datasets"))

    from flax import nnx

    from chartjax.models import relation_network as rn
    from chartjax.tasks import figureqa

    types = [t for t in a.types.split(",") if t]
    templates = [int(t) for t in a.templates.split(",") if t]
    with tempfile.TemporaryDirectory(prefix="chartjax_bench_rn_") as tmp:
        data_dir = a.data_dir or corpora.figureqa(tmp, a.images, max(a.images // 4, 1))
        task = figureqa.make_task(data_dir=data_dir, image_size=a.image_size, antialias=True)
        train = load_split(task, "train1", types, templates, a.limit)
        evals = {
            s: load_split(task, s, types, templates, 0) for s in ("validation1", "validation2")
        }
    cfg = rn.RNConfig(
        kind="rn",
        image_size=a.image_size,
        conv_layers=a.conv_layers,
        vocab_size=len(figureqa.vocabulary()),
        dropout=a.dropout,
        g_dim=a.g_dim,
        f_dim=a.g_dim,
        lstm_dim=a.lstm_dim,
    )
    model = rn.build(cfg, nnx.Rngs(a.seed))
    step, predict = figureqa_sanity.adam_fns(model, a.lr)

    def evaluate(d) -> dict:
        preds = []
        for i in range(0, len(d["label"]), EVAL_BATCH):
            b = {k: d[k][i : i + EVAL_BATCH] for k in INPUTS}
            n = len(b["image"])
            b = {k: np.concatenate([v, np.repeat(v[:1], EVAL_BATCH - n, 0)]) for k, v in b.items()}
            preds.append(np.asarray(predict(model, b))[:n])  # one compiled shape
        pr = np.concatenate(preds)
        ok = pr == d["label"]
        return {
            "accuracy": round(100 * float(ok.mean()), 2),
            "predicted_yes_pct": round(100 * float(pr.mean()), 1),
            "by_figure_type": {
                t: round(100 * float(ok[d["figure_type"] == t].mean()), 1)
                for t in sorted(set(d["figure_type"]))
            },
        }

    harness.progress(
        {"train_questions": len(train["label"])} | {s: len(d["label"]) for s, d in evals.items()}
    )
    rng = np.random.default_rng(a.seed)
    order, pos = rng.permutation(len(train["label"])), 0
    curve, losses, accs, t0 = [], [], [], time.time()
    for s in range(1, a.steps + 1):
        if pos + a.batch > len(order):
            order, pos = rng.permutation(len(train["label"])), 0
        idx = order[pos : pos + a.batch]
        pos += a.batch
        loss, acc = step({k: train[k][idx] for k in (*INPUTS, "label")})
        losses.append(float(loss))
        accs.append(float(acc))
        if s % 100 == 0 or s % a.eval_every == 0 or s == a.steps:
            row = {
                "step": s,
                "elapsed_s": round(time.time() - t0, 1),
                "train_loss": round(float(np.mean(losses[-100:])), 4),
                "train_accuracy": round(100 * float(np.mean(accs[-100:])), 1),
            }
            if s % a.eval_every == 0 or s == a.steps:
                row.update({s_: evaluate(d) for s_, d in evals.items()})
            curve.append(row)
            harness.progress(row)
    results = {"train_questions": int(len(train["label"])), "final": curve[-1], "curve": curve}
    return harness.emit(run.report(results), a.out)


if __name__ == "__main__":
    main()
