"""Training-curve plots: train_metrics.jsonl and the evaluations' metrics.json (matplotlib, Agg)."""

from __future__ import annotations

import json
import os
import re

# The headline metric an evaluation panel shows by default, the first of these a run has.
PRIMARY_EVAL_METRICS = (
    "accuracy",
    "relaxed_accuracy",
    "rms_f1",
    "macro_f1",
    "f1",
    "bleu",
    "rouge_l",
    "cider",
)
_STEP_DIR = re.compile(r"^step_(\d+)$")
_CI = ("_ci95_low", "_ci95_high")


def read_train_metrics(path: str) -> list[dict]:
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{n}: not JSON ({e})") from e
    return rows


def read_eval_metrics(workdir: str, folder: str = "eval") -> dict[str, list[tuple[int, dict]]]:
    """{split: [(step, metrics)] by step} from `<workdir>/<folder>/<split>/step_<N>/metrics.json`;
    evaluations without metrics (a split without answers, predicted only) are left out."""
    root = os.path.join(workdir, folder)
    out: dict[str, list[tuple[int, dict]]] = {}
    for split in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        split_dir = os.path.join(root, split)
        for name in os.listdir(split_dir) if os.path.isdir(split_dir) else []:
            m, path = _STEP_DIR.match(name), os.path.join(split_dir, name, "metrics.json")
            if not m or not os.path.isfile(path):
                continue
            with open(path, encoding="utf-8") as f:
                obj = json.load(f)
            if obj.get("metrics"):
                out.setdefault(obj.get("split", split), []).append((int(m[1]), obj["metrics"]))
    return {split: sorted(points, key=lambda p: p[0]) for split, points in out.items()}


def default_eval_keys(evals: list[dict[str, list[tuple[int, dict]]]]) -> tuple[str, ...]:
    """The first of PRIMARY_EVAL_METRICS the runs' evaluations have, else their first metric."""
    names = [n for e in evals for points in e.values() for _, m in points for n in m]
    names = [n for n in dict.fromkeys(names) if not n.endswith(_CI)]
    return next(((k,) for k in PRIMARY_EVAL_METRICS if k in names), tuple(names[:1]))


def plot_training_curves(
    runs: dict[str, str],
    out_png: str,
    keys=("loss", "accuracy"),
    eval_keys: tuple[str, ...] | None = None,
) -> str:
    """One panel per training metric key, one line per run; then one panel per evaluation
    metric (`eval_keys`, default `default_eval_keys`; none without evaluations), one line per
    run and split, with the 95% CI as a band where metrics.json has it. `runs` maps a label
    to a workdir."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    evals = {label: read_eval_metrics(workdir) for label, workdir in runs.items()}
    if eval_keys is None:
        eval_keys = default_eval_keys(list(evals.values()))
    panels = len(keys) + len(eval_keys)
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 3.6), squeeze=False)
    train_axes, eval_axes = axes[0][: len(keys)], axes[0][len(keys) :]
    for label, workdir in runs.items():
        rows = read_train_metrics(os.path.join(workdir, "train_metrics.jsonl"))
        for ax, key in zip(train_axes, keys):
            pts = [(r["step"], r[key]) for r in rows if key in r]
            if pts:
                ax.plot(*zip(*pts), label=label, marker="." if len(pts) < 30 else None)
        for ax, key in zip(eval_axes, eval_keys):
            for split, points in evals[label].items():
                pts = [(s, m) for s, m in points if key in m]
                if not pts:
                    continue
                steps = [s for s, _ in pts]
                name = f"{label} {split}" if len(runs) > 1 else split
                (line,) = ax.plot(steps, [m[key] for _, m in pts], label=name, marker="o")
                if all(key + c in m for _, m in pts for c in _CI):
                    low = [m[key + _CI[0]] for _, m in pts]
                    high = [m[key + _CI[1]] for _, m in pts]
                    ax.fill_between(steps, low, high, color=line.get_color(), alpha=0.15)
    titles = [f"train {k}" for k in keys] + [f"eval {k}" for k in eval_keys]
    for ax, title in zip(axes[0], titles):
        ax.set_xlabel("step")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return out_png
