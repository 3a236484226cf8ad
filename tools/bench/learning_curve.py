"""The held-out learning curve of a bench/learning.py run, read from its workdir: RMS/RNSS per
evaluated step, whether the model reads the chart (title match), the scores of constant
predictions to set it against, and the plot."""

from __future__ import annotations

import glob
import json
import os

import numpy as np

from chartjax import plots


def drop_title(text: str) -> str:
    """The table without its "TITLE | ..." first line (DePlot's parser: case-insensitive,
    `<0x0A>` also a newline), so RMS scores the values and their keys alone."""
    from chartjax.data.tables import BYTE_NEWLINE

    lines = text.replace(BYTE_NEWLINE, "\n").split("\n")
    if lines and lines[0].lower().startswith("title |"):
        lines = lines[1:]
    return "\n".join(lines)


def rms_f1_per_chart(predictions: list[str], targets: list[str], title: bool = True) -> np.ndarray:
    """Per-chart RMS F1 (their mean is the reported RMS F1); `title=False`: both sides without
    their title rows."""
    from chartjax.metrics import tables as table_metrics

    if not title:
        predictions, targets = (
            [drop_title(p) for p in predictions],
            [drop_title(t) for t in targets],
        )
    return np.array([table_metrics.rms_example([t], p)[2] for p, t in zip(predictions, targets)])


def paired_bootstrap(a: np.ndarray, b: np.ndarray, seed: int = 0, n: int = 2000) -> dict:
    """Mean of a - b over the held-out charts with its 95% bootstrap interval (charts resampled
    with replacement, the same draw for both: the noise of a held-out set this size)."""
    diff = np.asarray(a, float) - np.asarray(b, float)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(n, len(diff)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return {"mean": float(diff.mean()), "ci95": [float(lo), float(hi)], "resamples": n}


def constant_baselines(raw: str, heldout_targets: list[str], seed: int) -> dict:
    """Held-out scores of one fixed prediction for every chart, chosen on training tables only
    (the best mean RMS F1 against 80 of them): what format and typical values earn without
    reading the chart. `table`: the best of 40 training tables; `title_only`: the best of the
    40 most common training titles alone (a title-only prediction has one datapoint, so its
    RMS precision is high: a collapsed model that writes one title scores about this)."""
    from collections import Counter

    from chartjax.metrics import tables as table_metrics

    train = []
    for path in sorted(glob.glob(os.path.join(raw, "tables", "*.txt"))):
        with open(path, encoding="utf-8") as f:
            train.append(f.read())
    rng = np.random.default_rng(seed)
    cands = rng.choice(len(train), min(40, len(train)), replace=False)
    refs = rng.choice(len(train), min(80, len(train)), replace=False)

    def fit(text):
        return np.mean(
            [table_metrics.rms_example([train[r]], text)[2] for r in refs if train[r] != text]
        )

    def scores(text):
        preds = [text] * len(heldout_targets)
        return {
            "rms_f1": table_metrics.rms(preds, heldout_targets).metrics["rms_f1"],
            "rnss": table_metrics.rnss(preds, heldout_targets).metrics["rnss"],
            "prediction": text,
        }

    def fit_no_title(text):
        others = [train[r] for r in refs if train[r] != text]
        return rms_f1_per_chart([text] * len(others), others, title=False).mean()

    titles = Counter(t.split("\n", 1)[0] for t in train if t.startswith("TITLE | "))
    out = {
        "table": scores(max((train[c] for c in cands), key=fit)),
        "title_only": scores(max((t for t, _ in titles.most_common(40)), key=fit)),
        # Chosen by RMS F1 without titles: the keys and values a fixed table gets right.
        "table_no_title": scores(drop_title(max((train[c] for c in cands), key=fit_no_title))),
    }
    for base in out.values():
        base["rms_f1_no_title"] = float(
            rms_f1_per_chart(
                [base["prediction"]] * len(heldout_targets), heldout_targets, False
            ).mean()
        )
    return out


def title_match(workdir: str, step: int) -> dict:
    """Whether the model reads the chart: the share of step `step`'s held-out predictions whose
    title is exact, their mean title ANLS (RMS scores the title as one datapoint), and how many
    distinct titles they hold (1: the model writes the same title whatever the chart); and the
    RMS F1 with the title rows removed from both sides (whether values are read)."""
    from chartjax.metrics import tables as table_metrics

    distinct = set()
    exact, anls = [], []
    rows = read_predictions(workdir, step)
    for row in rows:
        want = table_metrics.parse_table(row["target"])[0] or ""
        got = table_metrics.parse_table(row["prediction"])[0] or ""
        exact.append(want == got)
        anls.append(table_metrics.anls(want, got))
        distinct.add(got)
    preds, targets = [r["prediction"] for r in rows], [r["target"] for r in rows]
    return {
        "title_exact": float(np.mean(exact)),
        "title_anls": float(np.mean(anls)),
        "distinct_titles": len(distinct),
        "rms_f1_no_title": float(rms_f1_per_chart(preds, targets, title=False).mean()),
    }


def read_predictions(workdir: str, step: int) -> list[dict]:
    """Step `step`'s held-out predictions.jsonl rows."""
    path = os.path.join(workdir, "eval", "train", f"step_{step}", "predictions.jsonl")
    with open(path) as f:
        return [json.loads(line) for line in f]


def read_losses(workdir: str) -> dict[int, dict]:
    """train_metrics.jsonl rows by step."""
    path = os.path.join(workdir, "train_metrics.jsonl")
    return {r["step"]: r for r in plots.read_train_metrics(path)} if os.path.exists(path) else {}


def read_curve(workdir: str) -> list[dict]:
    losses = read_losses(workdir)
    curve = []
    for path in glob.glob(os.path.join(workdir, "eval", "train", "step_*", "metrics.json")):
        with open(path) as f:
            obj = json.load(f)
        point = {
            "step": obj["step"],
            **{k: obj["metrics"][k] for k in ("rms_precision", "rms_recall", "rms_f1", "rnss")},
        }
        point.update(title_match(workdir, obj["step"]))
        logged = losses.get(obj["step"])
        if logged:
            point.update(train_loss=logged["loss"], elapsed_s=logged["elapsed_s"])
        curve.append(point)
    return sorted(curve, key=lambda p: p["step"])


def plot(
    curve: list[dict], losses: list[list[float]], baseline: dict, png: str, title: str
) -> None:
    """RMS F1 (own scale: it stays small), RNSS, and the training loss against the step.
    (RMS precision is 1 for a prediction without datapoints, DePlot's rule: not plotted.)"""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 4, figsize=(17, 3.8))
    steps = [p["step"] for p in curve]
    ax[0].plot(steps, [p["rms_f1"] for p in curve], marker="o", color="C0", label="model")
    ax[0].set(xlabel="step", ylabel="held-out RMS F1", title=title)
    ax[1].plot(steps, [p["rnss"] for p in curve], marker="o", color="C3", label="model")
    ax[1].set(xlabel="step", ylabel="held-out RNSS", ylim=(0, 1))
    for a, key in ((ax[0], "rms_f1"), (ax[1], "rnss")):
        a.axhline(baseline["table"][key], color="grey", linestyle="--", label="constant table")
        if key == "rms_f1":
            a.axhline(
                baseline["title_only"][key], color="grey", linestyle=":", label="constant title"
            )
        a.legend(loc="lower right")
    ax[2].plot(steps, [p["title_anls"] for p in curve], marker="o", color="C2", label="title ANLS")
    ax[2].plot(
        steps, [p["title_exact"] for p in curve], marker="s", color="C1", label="title exact"
    )
    ax[2].set(xlabel="step", ylabel="held-out title match", ylim=(0, 1))
    ax[2].legend(loc="upper left")
    ax[3].plot([s for s, _ in losses], [v for _, v in losses], marker=".")
    ax[3].set(xlabel="step", ylabel="train loss (mean per target token)")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
