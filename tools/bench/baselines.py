"""Baselines the runner's benches are set against, computed from a corpus's labels by small
functions, and the held-out table scores of the reading benches (tools/gpu/checks.py scores
its reading checks with them too).

* `figureqa_majority`: the best constant answer, chosen on train1's answers and scored on each
  validation split (what a model that ignores the image and the question earns);
* `chart_info_tables`: the best constant tables of a CHART-Info corpus (`constant_baselines`:
  chosen on the training tables, scored on the held-out ones);
* `reads_values`, `number_cells`: a run's held-out predictions against those constants, with a
  paired bootstrap interval of the margin over charts.
"""

from __future__ import annotations

import glob
import json
import os

import numpy as np


def figureqa_majority(corpus: str, raw: str = "raw") -> dict:
    """The constant yes/no answer most frequent in `<corpus>/<raw>/train1/qa_pairs.json`, and
    its accuracy on each validation split the corpus has (FigureQA's release layout)."""

    def answers(split: str) -> list[int]:
        with open(os.path.join(corpus, raw, split, "qa_pairs.json"), encoding="utf-8") as f:
            return [int(q["answer"]) for q in json.load(f)["qa_pairs"]]

    train = answers("train1")
    best = int(np.mean(train) >= 0.5)
    out: dict = {
        "answer": "yes" if best else "no",
        "train1_accuracy": float(np.mean([a == best for a in train])),
    }
    for split in ("validation1", "validation2"):
        if os.path.isdir(os.path.join(corpus, raw, split)):
            out[f"{split}_accuracy"] = float(np.mean([a == best for a in answers(split)]))
    return out


def chart_info_tables(corpus: str, seed: int = 0) -> dict:
    """`constant_baselines` of `<corpus>/raw_train` against `<corpus>/raw_heldout`'s tables."""
    targets = []
    for path in sorted(glob.glob(os.path.join(corpus, "raw_heldout", "tables", "*.txt"))):
        with open(path, encoding="utf-8") as f:
            targets.append(f.read())
    return constant_baselines(os.path.join(corpus, "raw_train"), targets, seed)


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


def eval_folder_of(workdir: str, split: str) -> str:
    """The folder of `workdir` holding `split`'s newest evaluation: `eval/`, or the
    `eval_<digest>/` that an evaluation with bindings other than the run's writes to
    (chartjax/evaluate.eval_folder: the reading benches evaluate held-out charts through
    another DATA_DIR)."""
    steps = glob.glob(os.path.join(workdir, "eval*", split, "step_*"))
    if not steps:
        raise FileNotFoundError(f"{workdir}: no evaluation of split {split!r} (eval*/{split}/)")
    return os.path.dirname(os.path.dirname(max(steps, key=os.path.getmtime)))


def read_predictions(eval_dir: str, step: int, split: str = "train") -> list[dict]:
    """Step `step`'s held-out predictions.jsonl rows under `eval_dir` (eval_folder_of)."""
    path = os.path.join(eval_dir, split, f"step_{step}", "predictions.jsonl")
    with open(path) as f:
        return [json.loads(line) for line in f]


def train_vocab(raw: str, out_prefix: str, vocab_size: int, split_digits: bool = False) -> str:
    from chartjax.tasks import deplot
    from chartjax.tools import train_vocab as tv

    texts = [deplot.PROMPT]
    for path in sorted(glob.glob(os.path.join(raw, "tables", "*.txt"))):
        with open(path, encoding="utf-8") as f:
            texts.append(f.read())
    return tv.train(
        texts, out_prefix, vocab_size=vocab_size, hard_vocab_limit=False, split_digits=split_digits
    )


def reads_values(eval_dir: str, step: int, baselines: dict, seed: int) -> dict:
    """Whether values are read off the chart: step `step`'s held-out RMS F1 with the title rows
    removed, against the best constant prediction's on the same charts (the best of
    `baselines` on the held-out charts themselves, which favours the constant), with a paired
    bootstrap interval of the difference over charts. `margin_ci95` above 0: the gain is larger
    than the noise of this held-out set."""
    rows = read_predictions(eval_dir, step)
    targets = [r["target"] for r in rows]
    model = rms_f1_per_chart([r["prediction"] for r in rows], targets, False)
    name, best = max(baselines.items(), key=lambda kv: kv[1]["rms_f1_no_title"])
    const = rms_f1_per_chart([best["prediction"]] * len(rows), targets, False)
    boot = paired_bootstrap(model, const, seed)
    return {
        "rms_f1_no_title": float(model.mean()),
        "best_constant": name,
        "best_constant_rms_f1_no_title": float(const.mean()),
        "margin": boot["mean"],
        "margin_ci95": boot["ci95"],
        "charts_scoring_above_0": int((model > 0).sum()),
        "beats_constant": boot["ci95"][0] > 0,
    }


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


def number_cells(eval_dir: str, step: int, baselines: dict, seed: int) -> dict:
    """Step `step`'s number-cell exact match against the best constant table's (chosen on the
    held-out charts themselves, which favours the constant), paired bootstrap over charts."""
    rows = read_predictions(eval_dir, step)
    targets = [r["target"] for r in rows]
    model = number_cell_rates([r["prediction"] for r in rows], targets)
    consts = {
        name: number_cell_rates([b["prediction"]] * len(rows), targets)
        for name, b in baselines.items()
    }
    name = max(consts, key=lambda k: consts[k].mean())
    boot = paired_bootstrap(model, consts[name], seed)
    return {
        "exact": float(model.mean()),
        "best_constant": name,
        "best_constant_exact": float(consts[name].mean()),
        "margin": boot["mean"],
        "margin_ci95": boot["ci95"],
        "beats_constant": boot["ci95"][0] > 0,
    }


# ------------------------------------------------------------------ ChartQA ----------------


def chartqa_split(raw: str, folder: str) -> list[dict]:
    """A ChartQA-layout split folder's questions (`query`, `label`, `source`) with `names`: its
    chart's category names (the first column of `tables/<stem>.csv`)."""
    import csv

    out = []
    for source in ("human", "augmented"):
        with open(os.path.join(raw, folder, f"{folder}_{source}.json"), encoding="utf-8") as f:
            for q in json.load(f):
                stem = os.path.splitext(q["imgname"])[0]
                with open(
                    os.path.join(raw, folder, "tables", f"{stem}.csv"), encoding="utf-8"
                ) as t:
                    names = [r[0] for r in list(csv.reader(t))[1:] if r]
                out.append(
                    {"query": q["query"], "label": q["label"], "source": source, "names": names}
                )
    return out


def relaxed_mode(labels: list[str], candidates=None) -> str:
    """The candidate (each distinct label by default) that is relaxed-correct (pix2struct's
    protocol) for the most `labels`; ties go to the first in sorted order."""
    from chartjax.metrics.chartqa import relaxed_correctness

    cands = sorted(set(labels if candidates is None else candidates))
    return max(cands, key=lambda c: sum(relaxed_correctness(t, c) for t in labels))


def question_template(query: str, names: list[str]) -> str:
    """`query` with its chart's category names (whole words, longest first) masked as `{}`."""
    import re

    for name in sorted(names, key=len, reverse=True):
        query = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", "{}", query)
    return query


def chartqa_answers(corpus: str, raw: str = "raw", train: str = "train", heldout: str = "test"):
    """The held-out relaxed accuracy (overall, human, augmented, with 95% intervals as
    chartjax.metrics.chartqa reports a model's) of two answers that never look at the chart:

    * `constant`: one answer for every question, the held-out labels' relaxed mode (chosen on
      the held-out set itself, which favours it);
    * `question_only`: per question template (the question with its chart's category names
      masked), the relaxed mode of the training answers of that template; a template training
      never saw gets the relaxed mode of the 100 most frequent training answers. The best
      answer to a question without the chart maximises the expected relaxed correctness given
      the question, i.e. is the relaxed mode of the answers to that question; pooling questions
      that differ only in a category name estimates it from more answers (the generator draws
      values independently of the names; real corpora's names carry little more)."""
    from collections import Counter

    from chartjax.metrics.chartqa import chartqa_scores

    def scores(predictions, rows):
        m = chartqa_scores(predictions, [r["label"] for r in rows], [r["source"] for r in rows])
        return {k: v for k, v in m.metrics.items() if k.startswith("relaxed_accuracy")}

    raw = os.path.join(corpus, raw)
    rows, seen = chartqa_split(raw, heldout), chartqa_split(raw, train)
    labels = [r["label"] for r in rows]
    constant = max(
        sorted(set(labels)), key=lambda c: scores([c] * len(rows), rows)["relaxed_accuracy"]
    )
    by_template: dict[str, list[str]] = {}
    for r in seen:
        by_template.setdefault(question_template(r["query"], r["names"]), []).append(r["label"])
    best = {t: relaxed_mode(v) for t, v in by_template.items()}
    templates = [question_template(r["query"], r["names"]) for r in rows]
    unseen = sum(t not in best for t in templates)
    if unseen:
        common = [a for a, _ in Counter(r["label"] for r in seen).most_common(100)]
        fallback = relaxed_mode([r["label"] for r in seen], common)
    predictions = [best[t] if t in best else fallback for t in templates]
    return {
        "heldout_questions": len(rows),
        "constant": {"answer": constant, **scores([constant] * len(rows), rows)},
        "question_only": {
            "templates": len(best),
            "unseen_templates": unseen,
            **scores(predictions, rows),
        },
    }
